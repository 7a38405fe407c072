package census

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults of [Options].
const (
	// DefaultInterval: a census every 15s, so that a consumer left on the old
	// trust is named within one Prometheus scrape interval of the usual 15s
	// to 30s.
	DefaultInterval = 15 * time.Second
	// DefaultMinSpacing: pod events never make two censuses of one
	// TrustRotation closer than this.
	DefaultMinSpacing = 2 * time.Second
	// DefaultVolumeDelay and DefaultCTBDelay are the kubelet's propagation
	// delays when a TrustRotation gives none (see v1alpha1.Propagation).
	DefaultVolumeDelay = 2 * time.Minute
	DefaultCTBDelay    = 6 * time.Minute
	// DefaultHandshakeTimeout bounds one handshake or scrape.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultConcurrency bounds the handshakes and scrapes run at once.
	DefaultConcurrency = 16
)

// Options configure the census controller; zero fields take their defaults.
type Options struct {
	// Interval is how often each TrustRotation's census is taken.
	Interval time.Duration
	// MinSpacing is the least time between two censuses of one
	// TrustRotation.
	MinSpacing time.Duration
	// HandshakeTimeout bounds one TLS handshake or one scrape.
	HandshakeTimeout time.Duration
	// Concurrency bounds the handshakes and scrapes in flight.
	Concurrency int
	// HTTPClient queries Prometheus and scrapes pods (default: a client with
	// HandshakeTimeout as its timeout). It carries no credentials: the URLs
	// are those TrustRotations name.
	HTTPClient *http.Client
	// PrometheusURL and PrometheusClient are the cluster's Prometheus and the
	// client that holds its credentials and TLS trust: a TrustRotation whose
	// evidence.prometheus.url is at PrometheusURL's origin (scheme, host and
	// port) is queried with PrometheusClient, any other with HTTPClient, so
	// that a TrustRotation cannot send the credentials elsewhere.
	PrometheusURL    string
	PrometheusClient *http.Client
	// Registerer receives the metrics (default controller-runtime's
	// registry); MetricsPrefix prefixes them (default hotcert).
	Registerer    prometheus.Registerer
	MetricsPrefix string
	// Clock is the time the census judges by and stamps the status with
	// (when an object was first seen holding the new CA, conditions'
	// transitions), default the real one. The pacing of censuses (Interval,
	// MinSpacing) runs in real time, as the work queue does.
	Clock clock.PassiveClock
	// Namespaces and NamespaceSelector, when set, restrict the census to
	// the pods of those namespaces (of the namespaces whose labels match;
	// with both, of those of Namespaces that match), as hotcert-controller's
	// --namespace and --namespace-selector restrict the rollout controller.
	// The selector is read at each census, so a namespace that starts
	// matching is counted from the next one. A trust-manager Bundle's
	// targets are followed in those namespaces only; a ConfigMap or Secret
	// the spec names in another namespace is an error of its entry (its
	// consumers cannot be counted). The status's summary names the scope.
	Namespaces        []string
	NamespaceSelector labels.Selector
	// SkipNameValidation lets several managers in one process (tests)
	// register the controller.
	SkipNameValidation bool

	// Drive lets TrustRotations in mode Drive take their steps (write their
	// bundles, switch their Certificates, roll opted-in workloads). Without
	// it they are observed, and status.drive says why nothing moves.
	Drive bool
}

func (o Options) withDefaults() Options {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MinSpacing <= 0 {
		o.MinSpacing = DefaultMinSpacing
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.HandshakeTimeout}
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	if o.MetricsPrefix == "" {
		o.MetricsPrefix = "hotcert"
	}
	if o.NamespaceSelector != nil && o.NamespaceSelector.Empty() {
		o.NamespaceSelector = nil // every namespace
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return o
}
