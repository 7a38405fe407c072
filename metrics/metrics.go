// Package metrics exports hotcert's reload outcomes as Prometheus metrics.
//
// With the defaults (prefix "hotcert", label "component") a Recorder registers:
//
//	hotcert_tls_cert_reload_total{component,result="success|failure"}   counter
//	hotcert_tls_reload_failures_total{component}                        counter
//	hotcert_tls_cert_not_after_seconds{component}                       gauge
//	hotcert_tls_cert_not_before_seconds{component}                      gauge (with a leaf)
//	hotcert_tls_cert_last_reload_timestamp_seconds{component}           gauge
//	hotcert_tls_ca_bundle_certificates{component}                       gauge
//	hotcert_tls_cert_info{component,sha256,serial,issuer}               gauge (1)
//	hotcert_tls_ca_certificate_info{component,sha256,subject}           gauge (1 per CA)
//	hotcert_tls_files_never_updated{component}                          gauge
//
// Prefix, label name and result values are options so a product keeps its own
// names: prefix "argocd_agent" with results "success"/"error" gives the argocd-agent
// proposal's names, prefix "dexaflow" with label "listener" gives
// dexaflow_tls_reload_failures_total{listener="agent_grpc"}.
//
// Counters move once per distinct content change or distinct bad content, because
// the Reloader calls the Recorder only then: never per handshake, poll or resync.
//
// [NewDrain] counts the drains of package drain (its drain.Observer), named by the
// same options. [NewNaming] and [NewReloads] are the pieces the Recorder and
// jwtkeys/jwtmetrics are built from: the reload-outcome series of a reloader of
// your own (one built on package reload), named like hotcert's.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
)

// Recorder is a [hotcert.Observer] backed by Prometheus collectors.
type Recorder struct {
	reloads   *Reloads
	notAfter  *prometheus.GaugeVec
	notBefore *prometheus.GaugeVec
	caCerts   *prometheus.GaugeVec
	frozen    *prometheus.GaugeVec
	held      *held
}

var (
	_ hotcert.Observer             = (*Recorder)(nil)
	_ hotcert.NeverUpdatedObserver = (*Recorder)(nil)
)

// Option names the series of a [Recorder]. The same options name the JWT key series
// of package jwtkeys/jwtmetrics and the drain series ([NewDrain]): pass one list to
// all, and one prefix and label cover every hotcert series of a process.
type Option interface{ applyNaming(*Naming) }

type optionFunc func(*Naming)

func (f optionFunc) applyNaming(n *Naming) { f(n) }

// WithPrefix sets the metric name prefix (default "hotcert").
func WithPrefix(p string) Option { return optionFunc(func(n *Naming) { n.prefix = p }) }

// WithComponentLabel sets the name of the label that carries the component (default
// "component").
func WithComponentLabel(name string) Option {
	return optionFunc(func(n *Naming) { n.label = name })
}

// WithResultValues sets the values of the result label (default "success" and "failure").
func WithResultValues(success, failure string) Option {
	return optionFunc(func(n *Naming) { n.success, n.failure = success, failure })
}

// New creates the collectors and registers them with reg (which may be nil to skip
// registration, e.g. to register the Recorder itself later as a prometheus.Collector).
func New(reg prometheus.Registerer, opts ...Option) (*Recorder, error) {
	n, err := NewNaming(opts...)
	if err != nil {
		return nil, err
	}
	name := n.Name
	r := &Recorder{
		reloads: NewReloads(n, ReloadSeries{
			Total:          "tls_cert_reload_total",
			TotalHelp:      "TLS material reloads by result: one per distinct content change or distinct bad content.",
			Failures:       "tls_reload_failures_total",
			FailuresHelp:   "TLS material that failed to load while the last good material kept serving. Alert on any increase.",
			LastReload:     "tls_cert_last_reload_timestamp_seconds",
			LastReloadHelp: "When the material in use was loaded, Unix seconds.",
		}),
		notAfter: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name("tls_cert_not_after_seconds"),
			Help: "NotAfter of the certificate in use (the earliest CA NotAfter for a trust-only bundle), Unix seconds.",
		}, []string{n.label}),
		// The leaf's lifetime, next to its NotAfter, is what alerts on the
		// fraction of it left need: a 24-hour certificate is always within a
		// day of expiry. A trust-only bundle has no series: the lifetime of
		// its earliest CA says nothing about when it should have been renewed.
		notBefore: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name("tls_cert_not_before_seconds"),
			Help: "NotBefore of the leaf certificate in use, Unix seconds (no series for a trust-only bundle).",
		}, []string{n.label}),
		caCerts: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name("tls_ca_bundle_certificates"),
			Help: "Number of CA certificates in the trust bundle in use.",
		}, []string{n.label}),
		frozen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: name("tls_files_never_updated"),
			Help: "Files of the source that will never be updated where they are read (a Kubernetes subPath mount): a rotation reaches the process only when it restarts.",
		}, []string{n.label}),
		held: newHeld(n),
	}
	if reg != nil {
		if err := reg.Register(r); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	return r, nil
}

// Describe implements prometheus.Collector.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) { r.collectors().Describe(ch) }

// Collect implements prometheus.Collector.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) { r.collectors().Collect(ch) }

func (r *Recorder) collectors() collectors {
	return append(collectors{r.reloads, r.notAfter, r.notBefore, r.caCerts, r.frozen}, r.held.collectors()...)
}

// ObserveLoad implements [hotcert.Observer]. The first load sets the gauges and
// creates the counters at zero (so alerts on increase() see a baseline); each reload
// also counts one success.
func (r *Recorder) ObserveLoad(component string, m *hotcert.Material, initial bool) {
	r.reloads.Loaded(component, m.LoadedAt(), initial)
	if na := m.NotAfter(); !na.IsZero() {
		r.notAfter.WithLabelValues(component).Set(float64(na.Unix()))
	}
	if nb := m.NotBefore(); !nb.IsZero() {
		r.notBefore.WithLabelValues(component).Set(float64(nb.Unix()))
	}
	r.caCerts.WithLabelValues(component).Set(float64(len(m.TrustCertificates())))
	r.held.observe(component, m)
}

// ObserveNeverUpdated implements [hotcert.NeverUpdatedObserver]: it sets the
// number of the component's files that will never be updated (0 included, as a
// baseline).
func (r *Recorder) ObserveNeverUpdated(component string, files []string) {
	r.frozen.WithLabelValues(component).Set(float64(len(files)))
}

// ObserveFailure implements [hotcert.Observer].
func (r *Recorder) ObserveFailure(component string, _ error) { r.reloads.Failed(component) }
