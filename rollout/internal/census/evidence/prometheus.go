package evidence

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

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
	// Client does the request (default http.DefaultClient): its transport
	// carries the credentials and the TLS trust of a Prometheus behind
	// authentication.
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
	vec, err := p.query(ctx, p.Query())
	if err != nil {
		return nil, err
	}
	b := newBuilder(or(p.Prefix, "hotcert"))
	p.eachPod(vec, func(pod, container string, s *model.Sample) {
		m := s.Metric
		labels := make(map[string]string, len(m))
		for k, v := range m {
			labels[string(k)] = string(v)
		}
		b.add(pod, container, string(m[model.MetricNameLabel]), labels)
	})
	return b.reports, nil
}

// eachPod calls f for each sample of vec whose series names a pod
// ("namespace/pod"), with the container it names ("" when none).
func (p Prometheus) eachPod(vec model.Vector, f func(pod, container string, s *model.Sample)) {
	nsL, podL, cL := model.LabelName(or(p.NamespaceLabel, "namespace")), model.LabelName(or(p.PodLabel, "pod")), model.LabelName(or(p.ContainerLabel, "container"))
	for _, s := range vec {
		m := s.Metric
		if m[nsL] == "" || m[podL] == "" {
			continue
		}
		f(string(m[nsL])+"/"+string(m[podL]), string(m[cL]), s)
	}
}

// query sends one instant query and returns its vector.
func (p Prometheus) query(ctx context.Context, expr string) (model.Vector, error) {
	hc := p.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	// A response is read whole by the API client: bound it, as the URL is
	// a TrustRotation's.
	limited := *hc
	limited.Transport = limitBody{next: hc.Transport}
	c, err := api.NewClient(api.Config{Address: p.URL, Client: &limited})
	if err != nil {
		return nil, fmt.Errorf("evidence: Prometheus URL: %w", err)
	}
	v, _, _, err := promv1.NewAPI(c).Query(ctx, expr, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("evidence: Prometheus query %s: %w", p.URL, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("evidence: Prometheus query %s: result type %s, want vector", p.URL, v.Type())
	}
	return vec, nil
}

// limitBody cuts every response body at maxResponse.
type limitBody struct{ next http.RoundTripper }

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	next := l.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = limitedBody{Reader: io.LimitReader(resp.Body, maxResponse), Closer: resp.Body}
	return resp, nil
}

type limitedBody struct {
	io.Reader
	io.Closer
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
