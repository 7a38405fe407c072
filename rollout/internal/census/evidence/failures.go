package evidence

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Failure is how many handshakes of one reason a pod's processes counted as
// failed in a window.
type Failure struct {
	// Pod is "namespace/name".
	Pod, Reason string
	Count       int
}

// FailuresQuery is the query HandshakeFailures runs: per pod and reason,
// the increase since since of the handshake failure counters the hotcert
// agent and control plane export (<prefix>_agent_… and
// <prefix>_controlplane_tls_handshake_failures_total{reason}, and a
// <prefix>_tls_handshake_failures_total of the same form), for reasons
// only. A series that did not exist at since (a pod started after it) counts
// from zero.
func (p Prometheus) FailuresQuery(since time.Time, reasons []string) string {
	pre := or(p.Prefix, "hotcert")
	by := fmt.Sprintf("%s, %s, reason", or(p.NamespaceLabel, "namespace"), or(p.PodLabel, "pod"))
	quoted := make([]string, len(reasons))
	for i, r := range reasons {
		quoted[i] = regexp.QuoteMeta(r)
	}
	sel := fmt.Sprintf(`{__name__=~"%s_(agent_|controlplane_)?tls_handshake_failures_total",reason=~"%s"}`, regexp.QuoteMeta(pre), strings.Join(quoted, "|"))
	at := fmt.Sprintf("%.3f", float64(since.UnixMilli())/1000)
	return fmt.Sprintf("(sum by (%s) (%s) - sum by (%s) (%s @ %s)) or sum by (%s) (%s)", by, sel, by, sel, at, by, sel)
}

// HandshakeFailures returns the handshake failures of reasons each pod's
// processes counted since since (only those with at least one), from one
// instant query.
func (p Prometheus) HandshakeFailures(ctx context.Context, since time.Time, reasons []string) ([]Failure, error) {
	vec, err := p.query(ctx, p.FailuresQuery(since, reasons))
	if err != nil {
		return nil, err
	}
	nsL, podL := model.LabelName(or(p.NamespaceLabel, "namespace")), model.LabelName(or(p.PodLabel, "pod"))
	var out []Failure
	for _, s := range vec {
		n := math.Round(float64(s.Value))
		if s.Metric[nsL] == "" || s.Metric[podL] == "" || n < 1 || math.IsNaN(n) {
			continue // a counter reset (a restarted process) reads negative: nothing counted
		}
		out = append(out, Failure{Pod: string(s.Metric[nsL]) + "/" + string(s.Metric[podL]), Reason: string(s.Metric["reason"]), Count: int(n)})
	}
	return out, nil
}
