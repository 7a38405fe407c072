package census

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// metrics are counts only: per TrustRotation, never per pod.
//
//	<prefix>_census_consumers{rotation,evidence}  consumers by weakest evidence
//	<prefix>_census_step_done{rotation,step}      1 once the step is done
//	<prefix>_census_errors_total{rotation}        censuses that failed (API errors)
//	<prefix>_census_pods                          pods the census keeps a record of
type metrics struct {
	consumers *prometheus.GaugeVec
	done      *prometheus.GaugeVec
	errors    *prometheus.CounterVec
	pods      prometheus.Gauge

	revocation *revocationMetrics // revocation_metrics.go
}

func newMetrics(reg prometheus.Registerer, prefix string) (*metrics, error) {
	m := &metrics{
		consumers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_census_consumers",
			Help: "Consumers of a TrustRotation's objects, by the weakest evidence of what they hold (reported, served, restarted, never, unknown, acknowledged).",
		}, []string{"rotation", "evidence"}),
		done: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: prefix + "_census_step_done",
			Help: "1 once a step of a TrustRotation (add-new-ca, switch-server-cert, remove-old-ca) is done everywhere, else 0.",
		}, []string{"rotation", "step"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "_census_errors_total",
			Help: "Censuses of a TrustRotation that failed on an API error and were retried.",
		}, []string{"rotation"}),
		pods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: prefix + "_census_pods",
			Help: "Pods the census keeps a record of: every pod of the namespaces in its scope, from the first census that needs them.",
		}),
	}
	for _, c := range []prometheus.Collector{m.consumers, m.done, m.errors, m.pods} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	var err error
	if m.revocation, err = newRevocationMetrics(reg, prefix); err != nil {
		return nil, err
	}
	return m, nil
}

// observe sets the gauges of rotation from its census.
func (m *metrics) observe(rotation string, r core.Result) {
	e := r.Counts.ByEvidence
	for ev, n := range map[string]int32{"reported": e.Reported, "served": e.Served, "restarted": e.Restarted,
		"never": e.Never, "unknown": e.Unknown, "acknowledged": e.Acknowledged} {
		m.consumers.WithLabelValues(rotation, ev).Set(float64(n))
	}
	for _, s := range r.Steps {
		v := 0.0
		if s.Done {
			v = 1
		}
		m.done.WithLabelValues(rotation, s.Name).Set(v)
	}
}

// forget removes the series of a deleted rotation.
func (m *metrics) forget(rotation string) {
	m.consumers.DeletePartialMatch(prometheus.Labels{"rotation": rotation})
	m.done.DeletePartialMatch(prometheus.Labels{"rotation": rotation})
	m.errors.DeletePartialMatch(prometheus.Labels{"rotation": rotation})
	m.revocation.forget(rotation)
}
