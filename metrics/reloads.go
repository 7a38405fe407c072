package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Naming is how a set of hotcert series is named: the metric name prefix, the name
// of the component label and the values of the result label, as a list of [Option]
// resolves them ([NewNaming]). A [Recorder], jwtkeys/jwtmetrics and the drain
// metrics name their series with one, so that one --metrics-prefix renames every
// series of a process; so can your own.
type Naming struct {
	prefix, label    string
	success, failure string
}

// NewNaming resolves opts over the defaults: prefix "hotcert", label "component",
// results "success" and "failure". It refuses a naming that cannot name series.
func NewNaming(opts ...Option) (Naming, error) {
	n := Naming{prefix: "hotcert", label: "component", success: "success", failure: "failure"}
	for _, o := range opts {
		o.applyNaming(&n)
	}
	if n.prefix == "" || n.label == "" || n.success == "" || n.failure == "" || n.success == n.failure {
		return Naming{}, errors.New("metrics: prefix, label and two distinct result values are required")
	}
	return n, nil
}

// Name returns the full name of the metric named suffix ("tls_cert_reload_total").
func (n Naming) Name(suffix string) string { return n.prefix + "_" + suffix }

// Label returns the name of the label that carries the component.
func (n Naming) Label() string { return n.label }

// ReloadSeries names the three reload-outcome series of one kind of reloaded content
// (name suffixes, without the prefix) and gives their help texts.
type ReloadSeries struct {
	// Total counts loads by result, e.g. "tls_cert_reload_total".
	Total, TotalHelp string
	// Failures counts failed loads, e.g. "tls_reload_failures_total".
	Failures, FailuresHelp string
	// LastReload is when the content in use was loaded, e.g.
	// "tls_cert_last_reload_timestamp_seconds".
	LastReload, LastReloadHelp string
}

// Reloads are the reload-outcome series every hotcert reloader exports, with one
// meaning, so that one alert style covers all of them: <total>{component,result}
// and <failures>{component} move once per distinct content change or distinct bad
// content (never per poll or resync), and both start at zero on the first load, so
// that alerts on increase() have a baseline; <last reload> is when the content in
// use was loaded. Reloads is a prometheus.Collector: register it, or collect it
// from a collector of your own.
type Reloads struct {
	total, failures  *prometheus.CounterVec
	lastReload       *prometheus.GaugeVec
	success, failure string
}

var _ prometheus.Collector = (*Reloads)(nil)

// NewReloads returns the series s names, named and labelled as n says.
func NewReloads(n Naming, s ReloadSeries) *Reloads {
	return &Reloads{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name(s.Total), Help: s.TotalHelp},
			[]string{n.label, "result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name(s.Failures), Help: s.FailuresHelp},
			[]string{n.label}),
		lastReload: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n.Name(s.LastReload), Help: s.LastReloadHelp},
			[]string{n.label}),
		success: n.success,
		failure: n.failure,
	}
}

// Loaded records content of component loaded at loadedAt: the first load
// (initial) creates the counters at zero, every later one counts a success.
func (r *Reloads) Loaded(component string, loadedAt time.Time, initial bool) {
	if initial {
		r.total.WithLabelValues(component, r.success)
		r.total.WithLabelValues(component, r.failure)
		r.failures.WithLabelValues(component)
	} else {
		r.total.WithLabelValues(component, r.success).Inc()
	}
	r.lastReload.WithLabelValues(component).Set(float64(loadedAt.UnixNano()) / 1e9)
}

// Failed records content of component that failed to load.
func (r *Reloads) Failed(component string) {
	r.total.WithLabelValues(component, r.failure).Inc()
	r.failures.WithLabelValues(component).Inc()
}

// Describe implements prometheus.Collector.
func (r *Reloads) Describe(ch chan<- *prometheus.Desc) { r.collectors().Describe(ch) }

// Collect implements prometheus.Collector.
func (r *Reloads) Collect(ch chan<- prometheus.Metric) { r.collectors().Collect(ch) }

func (r *Reloads) collectors() collectors {
	return collectors{r.total, r.failures, r.lastReload}
}

// collectors is one prometheus.Collector made of several: the series of a
// [Recorder] or [Reloads], described and collected together.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
