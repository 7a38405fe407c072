// Package reloadmetrics is the reload-outcome series every hotcert reloader exports
// (package metrics for TLS material, jwtkeys/jwtmetrics for JWT keys), with one
// naming scheme and one meaning, so that one --metrics-prefix renames every series
// and one alert style covers all of them.
package reloadmetrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Naming is what package metrics' options resolve to: the metric name prefix, the
// name of the component label, and the values of the result label.
type Naming struct {
	Prefix, Label    string
	Success, Failure string
}

// Defaults returns the default naming: prefix "hotcert", label "component",
// results "success" and "failure".
func Defaults() Naming {
	return Naming{Prefix: "hotcert", Label: "component", Success: "success", Failure: "failure"}
}

// Check reports a naming that cannot name series.
func (n Naming) Check() error {
	if n.Prefix == "" || n.Label == "" || n.Success == "" || n.Failure == "" || n.Success == n.Failure {
		return errors.New("prefix, label and two distinct result values are required")
	}
	return nil
}

// Name returns the full name of the metric named suffix ("tls_cert_reload_total").
func (n Naming) Name(suffix string) string { return n.Prefix + "_" + suffix }

// Series names the three reload-outcome series of one kind of reloaded content
// (suffixes, without the prefix) and their help texts.
type Series struct {
	Total, Failures, LastReload             string // e.g. "tls_cert_reload_total"
	TotalHelp, FailuresHelp, LastReloadHelp string
}

// Reloads are the reload-outcome series: <total>{component,result} and
// <failures>{component} move once per distinct content change or distinct bad
// content (never per poll or resync), and both start at zero on the first load, so
// that alerts on increase() have a baseline; <last reload> is when the content in
// use was loaded.
type Reloads struct {
	total, failures  *prometheus.CounterVec
	lastReload       *prometheus.GaugeVec
	success, failure string
}

// New returns the series s names, labelled as n says.
func New(n Naming, s Series) *Reloads {
	return &Reloads{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name(s.Total), Help: s.TotalHelp},
			[]string{n.Label, "result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name(s.Failures), Help: s.FailuresHelp},
			[]string{n.Label}),
		lastReload: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n.Name(s.LastReload), Help: s.LastReloadHelp},
			[]string{n.Label}),
		success: n.Success,
		failure: n.Failure,
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

// Collectors returns the series, to describe and collect.
func (r *Reloads) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.total, r.failures, r.lastReload}
}
