// Package jwtmetrics exports a jwtkeys.KeySet's outcomes as Prometheus metrics, named
// like package metrics' TLS metrics so that one dashboard and one alert style cover
// both. With the defaults (prefix "hotcert", label "component") a Recorder registers:
//
//	hotcert_jwt_key_reload_total{component,result="success|failure"}    counter
//	hotcert_jwt_reload_failures_total{component}                        counter
//	hotcert_jwt_key_last_reload_timestamp_seconds{component}            gauge
//	hotcert_jwt_verification_keys{component}                            gauge
//	hotcert_jwt_signing_key_info{component,kid,alg}                     gauge (1)
//	hotcert_jwt_verifications_total{component,result="ok|<reason>"}     counter
//
// The reload counters move once per distinct content change or distinct bad content,
// never per poll or informer resync. The verification counter moves once per token
// checked; its result is "ok" or a jwtkeys.RejectReason (expired, unknown_key, ...), so
// rejections during a rotation show up by cause. signing_key_info tells which key
// each replica signs with while a rotation propagates.
package jwtmetrics

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/metrics"
)

// Recorder is a jwtkeys.Observer backed by Prometheus collectors.
type Recorder struct {
	reloads       *metrics.Reloads
	verifications *prometheus.CounterVec
	keys, signing *prometheus.GaugeVec

	mu      sync.Mutex
	signers map[string][2]string // component -> kid, alg currently exported
}

var _ jwtkeys.Observer = (*Recorder)(nil)

// New creates the collectors and registers them with reg (nil skips
// registration). opts are package metrics' naming options (metrics.WithPrefix,
// metrics.WithComponentLabel, metrics.WithResultValues): pass the ones given to
// metrics.New and the TLS and JWT series share a prefix and label.
func New(reg prometheus.Registerer, opts ...metrics.Option) (*Recorder, error) {
	n, err := metrics.NewNaming(opts...)
	if err != nil {
		return nil, fmt.Errorf("jwtmetrics: %w", err)
	}
	name := n.Name
	r := &Recorder{
		reloads: metrics.NewReloads(n, metrics.ReloadSeries{
			Total:          "jwt_key_reload_total",
			TotalHelp:      "JWT key set reloads by result: one per distinct content change or distinct bad content.",
			Failures:       "jwt_reload_failures_total",
			FailuresHelp:   "JWT key content that failed to load while the last good keys kept serving. Alert on any increase.",
			LastReload:     "jwt_key_last_reload_timestamp_seconds",
			LastReloadHelp: "When the JWT key content in use was loaded, Unix seconds.",
		}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: name("jwt_verifications_total"),
			Help: "Tokens verified, by result: ok or the reason they were rejected.",
		}, []string{n.Label(), "result"}),
		keys: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name("jwt_verification_keys"),
			Help: "Keys that verify tokens: the signing key, listed keys, and retired keys inside their grace period.",
		}, []string{n.Label()}),
		signing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name("jwt_signing_key_info"),
			Help: "The key that signs new tokens (value 1), by kid and alg.",
		}, []string{n.Label(), "kid", "alg"}),
		signers: map[string][2]string{},
	}
	if reg != nil {
		if err := reg.Register(r); err != nil {
			return nil, fmt.Errorf("jwtmetrics: register: %w", err)
		}
	}
	return r, nil
}

func (r *Recorder) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.reloads, r.verifications, r.keys, r.signing}
}

// Describe implements prometheus.Collector.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range r.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	for _, c := range r.collectors() {
		c.Collect(ch)
	}
}

// ObserveLoad implements jwtkeys.Observer. The first load creates the counters at
// zero (so alerts on increase() have a baseline) — the verification counter for
// "ok" and for every jwtkeys.RejectReason; each reload counts one success.
func (r *Recorder) ObserveLoad(component string, info jwtkeys.SetInfo, initial bool) {
	r.reloads.Loaded(component, info.LoadedAt, initial)
	if initial {
		r.verifications.WithLabelValues(component, "ok")
		for _, reason := range jwtkeys.RejectReasons() {
			r.verifications.WithLabelValues(component, string(reason))
		}
	}
	r.ObserveKeys(component, info)
}

// ObserveFailure implements jwtkeys.Observer.
func (r *Recorder) ObserveFailure(component string, _ error) { r.reloads.Failed(component) }

// ObserveKeys implements jwtkeys.Observer.
func (r *Recorder) ObserveKeys(component string, info jwtkeys.SetInfo) {
	r.keys.WithLabelValues(component).Set(float64(len(info.Keys)))
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := [2]string{info.SigningKeyID, info.Algorithm}
	if old, ok := r.signers[component]; ok && old != cur {
		r.signing.DeleteLabelValues(component, old[0], old[1])
	}
	r.signers[component] = cur
	r.signing.WithLabelValues(component, cur[0], cur[1]).Set(1)
}

// ObserveVerify implements jwtkeys.Observer.
func (r *Recorder) ObserveVerify(component string, rejected jwtkeys.RejectReason) {
	result := "ok"
	if rejected != "" {
		result = string(rejected)
	}
	r.verifications.WithLabelValues(component, result).Inc()
}
