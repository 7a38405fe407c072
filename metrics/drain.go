package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Drain counts the drains of a drain.Server or drain.HTTPServer: it is a
// drain.Observer (pass it with drain.WithObserver). Create it with [NewDrain].
type Drain struct {
	started *prometheus.CounterVec
	drained *prometheus.CounterVec
	cuts    *prometheus.CounterVec
}

// NewDrain registers with reg (nil skips registration), named by the same options
// a process passes to [New], so one prefix and one label name cover every series:
//
//	hotcert_tls_drains_started_total{component}            rotations that started a drain
//	hotcert_tls_connections_drained_total{component,reason} connections drained (reason identity|trust|revoked|peer_cert_expiring|own_cert_expiring)
//	hotcert_tls_connections_cut_total{component}            connections cut because their peer is no longer trusted or is revoked
func NewDrain(reg prometheus.Registerer, opts ...Option) (*Drain, error) {
	n, err := NewNaming(opts...)
	if err != nil {
		return nil, err
	}
	d := &Drain{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_drains_started_total"),
			Help: "Rotations that started draining connections opened under the previous certificate."}, []string{n.label}),
		drained: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_connections_drained_total"),
			Help: "Connections asked to reconnect (GOAWAY), or closed, by reason: identity (new certificate), trust (peer no longer trusted), revoked (peer on the deny list; closed), peer_cert_expiring (the peer's chain expires first) or own_cert_expiring (the chain served on it expires first)."}, []string{n.label, "reason"}),
		cuts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("tls_connections_cut_total"),
			Help: "Connections closed because their peer certificate is no longer acceptable: it no longer verifies against the client-CA bundle, or it is revoked."}, []string{n.label}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{d.started, d.drained, d.cuts} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metrics: register drain metrics: %w", err)
			}
		}
	}
	return d, nil
}

// ObserveDrainStarted implements drain.Observer.
func (d *Drain) ObserveDrainStarted(component string) { d.started.WithLabelValues(component).Inc() }

// ObserveDrained implements drain.Observer.
func (d *Drain) ObserveDrained(component, reason string) {
	d.drained.WithLabelValues(component, reason).Inc()
}

// ObserveCut implements drain.Observer.
func (d *Drain) ObserveCut(component string) { d.cuts.WithLabelValues(component).Inc() }
