package controller

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
)

// Defaults of [Options].
const (
	DefaultMinInterval        = time.Minute
	DefaultMaxRollouts        = 30
	DefaultBudgetWindow       = time.Minute
	DefaultRolloutWaitTimeout = 10 * time.Minute
	// DefaultTrustRecheck is how often a change deferred by the trust guard
	// is checked again.
	DefaultTrustRecheck   = 30 * time.Second
	DefaultMaxConcurrency = 4
	DefaultMetricsPrefix  = "hotcert"
)

// SecretCache is how the controller watches and caches Secrets and ConfigMaps.
// In every mode it keeps only a digest of each consumed value, never the data,
// once a decision is made; the modes differ in what the watch delivers and the
// informer cache holds.
type SecretCache string

const (
	// CacheReferenced (the default) watches whole objects but keeps the data
	// only of objects an opted-in workload references: a transform drops the
	// data (and labels, annotations, managed fields) of every other object as
	// it enters the cache. A change of a referenced object arrives with its
	// data, so rolling needs no extra read. Memory holds referenced data only;
	// the API server still sends every object's data to the controller (as it
	// does to Reloader, wave and kagent).
	CacheReferenced SecretCache = "referenced"
	// CacheMetadata watches metadata only (PartialObjectMetadata): the API
	// server never sends unreferenced data to the controller at all, and the
	// data of a referenced object is read with one GET per new version. The
	// smallest footprint and traffic; one API round trip more per change.
	CacheMetadata SecretCache = "metadata"
)

// cacheFull caches whole objects, as Reloader, wave and kagent do. Only the
// memory benchmark uses it (Options.cacheEverything), to measure the
// difference.
const cacheFull SecretCache = "full"

// viewMode is the cluster view's mode for c.
func (c SecretCache) viewMode() clusterview.Mode {
	switch c {
	case CacheMetadata:
		return clusterview.Metadata
	case cacheFull:
		return clusterview.Full
	}
	return clusterview.Referenced
}

// Options configure the rollout controller. The zero value is usable: every zero
// field takes its default (see Default).
type Options struct {
	// MinInterval is the minimum time between two rollouts of one workload
	// (default DefaultMinInterval); a workload's hotcert.dev/min-interval
	// annotation overrides it. Changes inside the interval coalesce into one
	// rollout at its end. A negative value means none.
	MinInterval time.Duration
	// MaxRollouts caps rollouts across all workloads per BudgetWindow (default
	// DefaultMaxRollouts per DefaultBudgetWindow); a negative value means no cap.
	MaxRollouts  int
	BudgetWindow time.Duration
	// RolloutWaitTimeout bounds how long a change waits for the workload's
	// previous rollout to finish, from when the change was detected (default
	// DefaultRolloutWaitTimeout). A Deployment past its progress deadline is not
	// waited for.
	RolloutWaitTimeout time.Duration
	// TrustRecheck is how often a change the trust guard defers (see
	// rollout.AnnotationTrustedBy) is checked again (default
	// DefaultTrustRecheck).
	TrustRecheck time.Duration
	// ExpiryMargin is the share of the lifetime of the leaf certificate a
	// workload's pods run, before its NotAfter, at which a change waiting for
	// a rollout window rolls anyway (default DefaultExpiryMargin, one sixth);
	// a workload's hotcert.dev/expiry-margin annotation overrides it. It must
	// be below 1.
	ExpiryMargin float64
	// DryRun makes the controller write nothing: it reports the rollouts it would
	// do with an Event and a metric. A workload's hotcert.dev/dry-run annotation
	// does the same for one workload.
	DryRun bool
	// SecretCache says what the controller keeps of Secrets and ConfigMaps
	// (default CacheReferenced); see the SecretCache constants.
	SecretCache SecretCache
	// ReferenceRules makes the controller follow ReferenceRules
	// (hotcert.dev/v1alpha1, see package rollout/chain): a workload that a
	// rule's chain reaches (an Agent's Deployment, through its ModelConfig, to
	// a Secret) is managed as if opted in, and what the chain consumes is
	// hashed with what its pod spec consumes. The ReferenceRule CRD must be
	// installed, and the controller must be able to read the kinds the rules
	// name.
	ReferenceRules bool
	// Namespaces, if set, restricts the controller to these namespaces
	// (default: all): only their Secrets, ConfigMaps and workloads are
	// watched.
	Namespaces []string
	// NamespaceSelector, if set, restricts the controller to the namespaces
	// whose labels match it (and, with Namespaces, that are among them):
	// Secrets, ConfigMaps and workloads of other namespaces are not watched,
	// so the API server never sends them. A namespace is picked up when it
	// starts matching and dropped when it stops, while the controller runs.
	// The manager must be built with NewCache.
	NamespaceSelector labels.Selector
	// WorkloadSelector, if set, restricts the controller to the Deployments,
	// StatefulSets and DaemonSets whose labels match it: other workloads are
	// not watched, and a managed workload that stops matching is left alone
	// (an OutOfScope Event says so; its stamp and state annotations stay).
	WorkloadSelector labels.Selector
	// AlsoReferenced, if set, names more objects whose data CacheReferenced
	// keeps (e.g. Secrets a custom resource chain references): it is asked
	// about every object no opted-in workload's pod spec references. It must be
	// fast and safe for concurrent use.
	AlsoReferenced func(kind rollout.Kind, namespace, name string) bool
	// HashKey, if set, keys the hashes (HMAC-SHA256); see rollout.WithHashKey.
	HashKey []byte
	// Webhook, if its Addr is set, serves the admission webhook that keeps the
	// stamp and the controller's state when an owner controller rewrites a
	// workload (see package rollout/webhook), on every replica.
	Webhook Webhook
	// MaxConcurrentReconciles per workload kind (default DefaultMaxConcurrency).
	MaxConcurrentReconciles int
	// Registerer receives the metrics (default controller-runtime's registry,
	// served by the manager's metrics endpoint); MetricsPrefix prefixes their
	// names (default "hotcert").
	Registerer    prometheus.Registerer
	MetricsPrefix string
	// Clock is the controller's clock (default the real one).
	Clock clock.PassiveClock
	// SkipNameValidation lets several managers in one process (tests) register
	// controllers of the same name.
	SkipNameValidation bool

	// cacheEverything makes the controller cache whole Secrets and ConfigMaps
	// (cacheFull), for the memory benchmark's comparison.
	cacheEverything bool
}

// Webhook is where the admission webhook listens and the files of its serving
// certificate (chain) and key, PEM, reloaded when they change: a renewal is
// served at the next handshake.
type Webhook struct {
	Addr              string // e.g. ":9443"
	CertFile, KeyFile string
}

// Default returns o with every zero field set to its default.
func (o Options) Default() Options {
	if o.MinInterval == 0 {
		o.MinInterval = DefaultMinInterval
	}
	if o.MinInterval < 0 {
		o.MinInterval = 0
	}
	if o.MaxRollouts == 0 {
		o.MaxRollouts = DefaultMaxRollouts
	}
	if o.BudgetWindow == 0 {
		o.BudgetWindow = DefaultBudgetWindow
	}
	if o.RolloutWaitTimeout == 0 {
		o.RolloutWaitTimeout = DefaultRolloutWaitTimeout
	}
	if o.ExpiryMargin == 0 {
		o.ExpiryMargin = DefaultExpiryMargin
	}
	if o.TrustRecheck <= 0 {
		o.TrustRecheck = DefaultTrustRecheck
	}
	if o.MaxConcurrentReconciles == 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrency
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	if o.SecretCache == "" {
		o.SecretCache = CacheReferenced
	}
	if o.cacheEverything {
		o.SecretCache = cacheFull
	}
	if o.MetricsPrefix == "" {
		o.MetricsPrefix = DefaultMetricsPrefix
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.NamespaceSelector != nil && o.NamespaceSelector.Empty() {
		o.NamespaceSelector = nil // every namespace
	}
	if o.WorkloadSelector != nil && o.WorkloadSelector.Empty() {
		o.WorkloadSelector = nil
	}
	return o
}

// Validate reports the first nonsensical option.
func (o Options) Validate() error {
	switch {
	case o.BudgetWindow < 0:
		return fmt.Errorf("controller: rollout budget window %s is negative", o.BudgetWindow)
	case o.RolloutWaitTimeout < 0:
		return fmt.Errorf("controller: rollout wait timeout %s is negative", o.RolloutWaitTimeout)
	case o.SecretCache != "" && o.SecretCache != CacheReferenced && o.SecretCache != CacheMetadata && !(o.cacheEverything && o.SecretCache == cacheFull):
		return fmt.Errorf("controller: secret cache %q: want referenced or metadata", o.SecretCache)
	case o.Webhook.Addr != "" && (o.Webhook.CertFile == "" || o.Webhook.KeyFile == ""):
		return errors.New("controller: the webhook needs a certificate file and a key file")
	case o.ExpiryMargin < 0 || o.ExpiryMargin >= 1:
		return fmt.Errorf("controller: expiry margin %v: want a share of the lifetime, from 0 to 1", o.ExpiryMargin)
	case o.MaxConcurrentReconciles < 0:
		return fmt.Errorf("controller: max concurrent reconciles %d is negative", o.MaxConcurrentReconciles)
	}
	return nil
}
