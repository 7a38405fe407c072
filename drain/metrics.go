package drain

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts drains. Create it with [NewMetrics] and pass it with [WithMetrics].
type Metrics struct {
	started *prometheus.CounterVec
	drained *prometheus.CounterVec
	cuts    *prometheus.CounterVec
}

// NewMetrics registers, with prefix "hotcert" unless given:
//
//	hotcert_tls_drains_started_total{component}            rotations that started a drain
//	hotcert_tls_connections_drained_total{component,reason} connections sent a GOAWAY (reason identity|trust)
//	hotcert_tls_connections_cut_total{component}            connections drained because their peer is no longer trusted
func NewMetrics(reg prometheus.Registerer, prefix string) (*Metrics, error) {
	if prefix == "" {
		prefix = "hotcert"
	}
	m := &Metrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_tls_drains_started_total",
			Help: "Rotations that started draining connections opened under the previous certificate."}, []string{"component"}),
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_tls_connections_drained_total",
			Help: "Connections asked to reconnect (GOAWAY), by reason: identity (new certificate) or trust (peer no longer trusted)."}, []string{"component", "reason"}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + "_tls_connections_cut_total",
			Help: "Connections closed because their peer certificate no longer verifies against the client-CA bundle."}, []string{"component"}),
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
