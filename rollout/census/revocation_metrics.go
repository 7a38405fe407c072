package census

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// revocationMetrics are counts only: per TrustRotation, never per pod or per
// revoked certificate.
//
//	<prefix>_census_revocation_consumers{rotation,state}      consumers by state (refused, connections_left, not_refused, unknown, acknowledged)
//	<prefix>_census_revocation_enforced{rotation}             1 once RevocationEnforced is True
//	<prefix>_census_revocation_denied_connections{rotation}   open connections the consumers' lists deny, summed
type revocationMetrics struct {
	consumers *prometheus.GaugeVec
	enforced  *prometheus.GaugeVec
	denied    *prometheus.GaugeVec
}

func newRevocationMetrics(reg prometheus.Registerer, prefix string) (*revocationMetrics, error) {
	m := &revocationMetrics{
		consumers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_census_revocation_consumers",
			Help: "Consumers of a TrustRotation's trust, by what they report of its revocation (refused, connections_left, not_refused, unknown, acknowledged).",
		}, []string{"rotation", "state"}),
		enforced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_census_revocation_enforced",
			Help: "1 once a TrustRotation's revocation is proven everywhere (condition RevocationEnforced), else 0.",
		}, []string{"rotation"}),
		denied: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_census_revocation_denied_connections",
			Help: "Open connections that the deny lists of a TrustRotation's consumers deny, summed over the consumers that report them.",
		}, []string{"rotation"}),
	}
	for _, c := range []prometheus.Collector{m.consumers, m.enforced, m.denied} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

// observe sets the gauges of rotation from its revocation census.
func (m *revocationMetrics) observe(rotation string, r core.RevocationResult, enforced bool) {
	s, e := r.Counts.ByState, r.Counts.ByEvidence
	for state, n := range map[string]int32{"refused": s.Refused, "connections_left": s.ConnectionsLeft, "not_refused": s.NotRefused,
		"unknown": e.Unknown, "acknowledged": e.Acknowledged} {
		m.consumers.WithLabelValues(rotation, state).Set(float64(n))
	}
	v := 0.0
	if enforced {
		v = 1
	}
	m.enforced.WithLabelValues(rotation).Set(v)
	m.denied.WithLabelValues(rotation).Set(float64(r.Counts.DeniedConnections))
}

// forget removes the series of rotation.
func (m *revocationMetrics) forget(rotation string) {
	for _, g := range []*prometheus.GaugeVec{m.consumers, m.enforced, m.denied} {
		g.DeletePartialMatch(prometheus.Labels{"rotation": rotation})
	}
}
