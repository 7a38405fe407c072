package drain

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/internal/reloadmetrics"
	"github.com/hotcert/hotcert/metrics"
)

// Metrics counts drains. Create it with [NewMetrics] and pass it with [WithMetrics].
type Metrics struct {
	label   string // the component label's name, also the key of the drain log lines
	started *prometheus.CounterVec
	drained *prometheus.CounterVec
	cuts    *prometheus.CounterVec
}

// NewMetrics registers, named by package metrics' options (the same list a process
// passes to metrics.New, so one prefix and one label name cover every series):
//
//	hotcert_tls_drains_started_total{component}            rotations that started a drain
//	hotcert_tls_connections_drained_total{component,reason} connections sent a GOAWAY (reason identity|trust)
//	hotcert_tls_connections_cut_total{component}            connections drained because their peer is no longer trusted
//
// The label's name is also the key that names the component on the drain log lines
// of a [Server] given these metrics.
func NewMetrics(reg prometheus.Registerer, opts ...metrics.Option) (*Metrics, error) {
	n := reloadmetrics.Defaults()
	for _, o := range opts {
		o.ApplyNaming(&n)
	}
	if err := n.Check(); err != nil {
		return nil, fmt.Errorf("drain: metrics naming: %w", err)
	}
	m := &Metrics{
		label: n.Label,
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_drains_started_total"),
			Help: "Rotations that started draining connections opened under the previous certificate."}, []string{n.Label}),
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_connections_drained_total"),
			Help: "Connections asked to reconnect (GOAWAY), by reason: identity (new certificate) or trust (peer no longer trusted)."}, []string{n.Label, "reason"}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_connections_cut_total"),
			Help: "Connections closed because their peer certificate no longer verifies against the client-CA bundle."}, []string{n.Label}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.started, m.drained, m.cuts} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("drain: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

func (m *Metrics) drainStarted(component string) {
	if m != nil {
		m.started.WithLabelValues(component).Inc()
	}
}

func (m *Metrics) connDrained(component, reason string) {
	if m != nil {
		m.drained.WithLabelValues(component, reason).Inc()
	}
}

func (m *Metrics) cut(component string) {
	if m != nil {
		m.cuts.WithLabelValues(component).Inc()
		m.drained.WithLabelValues(component, "trust").Inc()
	}
}

// logKey is the key naming the component on drain log lines: the metrics' label
// name, or "component" without metrics.
func (m *Metrics) logKey() string {
	if m == nil {
		return "component"
	}
	return m.label
}
