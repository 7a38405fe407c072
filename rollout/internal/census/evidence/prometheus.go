package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/hotcert/hotcert/rollout/internal/census"
)

// maxResponse bounds what is read of a Prometheus or metrics response.
const maxResponse = 64 << 20

// Prometheus reads what every pod's hotcert processes report from a
// Prometheus server's HTTP API, with one instant query per census: the
// <prefix>_tls_cert_info and <prefix>_tls_ca_certificate_info series of every
// target, grouped by the target labels that name a pod. A series that names
// no pod (a target not discovered as a pod) is left out.
type Prometheus struct {
	// URL is the API's base, e.g. http://prometheus.monitoring:9090.
	URL string
	// Client does the request (default http.DefaultClient).
	Client *http.Client
	// NamespaceLabel, PodLabel and ContainerLabel name the target labels
	// (default namespace, pod, container); Prefix is the metric prefix
	// (default hotcert).
	NamespaceLabel, PodLabel, ContainerLabel, Prefix string
}

// Query is the PromQL expression Reports sends.
func (p Prometheus) Query() string {
	pre := or(p.Prefix, "hotcert")
	return fmt.Sprintf(`{__name__=~"%s_tls_cert_info|%s_tls_ca_certificate_info"}`, pre, pre)
}

// Reports returns, by "namespace/pod", what each pod reports: one Report per
// container the series name ("" when they name none).
func (p Prometheus) Reports(ctx context.Context) (map[string][]census.Report, error) {
	u, err := url.Parse(p.URL)
	if err != nil {
		return nil, fmt.Errorf("evidence: Prometheus URL: %w", err)
	}
	u = u.JoinPath("api", "v1", "query")
	u.RawQuery = url.Values{"query": {p.Query()}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("evidence: Prometheus query: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	hc := p.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("evidence: Prometheus query: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, fmt.Errorf("evidence: Prometheus query: reading the response: %w", err)
	}
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("evidence: Prometheus query: HTTP %d, not a Prometheus API response: %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("evidence: Prometheus query: HTTP %d: %s: %s", resp.StatusCode, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("evidence: Prometheus query: result type %q, want vector", r.Data.ResultType)
	}
	b := newBuilder(or(p.Prefix, "hotcert"))
	nsL, podL, cL := or(p.NamespaceLabel, "namespace"), or(p.PodLabel, "pod"), or(p.ContainerLabel, "container")
	for _, s := range r.Data.Result {
		m := s.Metric
		if m[nsL] == "" || m[podL] == "" {
			continue
		}
		b.add(m[nsL]+"/"+m[podL], m[cL], m["__name__"], m)
	}
	return b.reports, nil
}

// builder groups series into reports.
type builder struct {
	leafName, caName string
	reports          map[string][]census.Report
}

func newBuilder(prefix string) *builder {
	return &builder{leafName: prefix + "_tls_cert_info", caName: prefix + "_tls_ca_certificate_info", reports: map[string][]census.Report{}}
}

// add adds one series (its name and labels) to the report of pod's
// container.
func (b *builder) add(pod, container, name string, labels map[string]string) {
	fp := strings.ToLower(labels["sha256"])
	if fp == "" || (name != b.leafName && name != b.caName) {
		return
	}
	rs := b.reports[pod]
	i := 0
	for i < len(rs) && rs[i].Container != container {
		i++
	}
	if i == len(rs) {
		rs = append(rs, census.Report{Container: container, CAs: map[string]bool{}})
	}
	if name == b.caName {
		rs[i].CAs[fp] = true
	} else {
		rs[i].Leaves = append(rs[i].Leaves, census.Leaf{SHA256: fp, Issuer: labels["issuer"]})
	}
	b.reports[pod] = rs
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
