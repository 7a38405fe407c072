package controller

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/budget"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
)

// Controller is the rollout controller. Build it with New, configure the
// manager with its CacheOptions and ClientOptions, then SetupWithManager.
type Controller struct {
	opts        Options
	metrics     *metrics
	store       *store
	shared      *shared
	report      *reporter
	namespaces  []string
	scope       *nsScope // nil without Options.NamespaceSelector (see NewCache)
	cacheReader atomic.Pointer[client.Reader]
	live        *referencerules.Live // nil unless Options.ReferenceRules
	webhook     *webhookServer       // nil unless Options.Webhook.Addr
	// hashOpts and watcher are what every kind's controller is built with;
	// targets, the kinds ReferenceRules declare (see targets.go).
	hashOpts []rollout.HashOption
	watcher  *refWatcher
	targets  targets
}

// New returns a rollout controller with options o (zero fields take their
// defaults) and registers its metrics with o.Registerer. With a webhook, it
// loads its certificate: a bad one is an error here, before the cluster is
// contacted.
func New(o Options) (*Controller, error) {
	o = o.Default()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{opts: o}
	if o.Webhook.Addr != "" {
		// First: a bad certificate leaves no metrics registered behind.
		var err error
		if c.webhook, err = newWebhookServer(o.Webhook.Addr, o.Webhook.CertFile, o.Webhook.KeyFile, o); err != nil {
			return nil, err
		}
	}
	c.store = &store{mode: o.SecretCache, clock: o.Clock, entries: map[objKey]*entry{}, isReferenced: c.isReferenced}
	m, err := newMetrics(o.Registerer, o.MetricsPrefix, func() float64 { return float64(c.store.len()) })
	if err != nil {
		if c.webhook != nil {
			c.webhook.close()
		}
		return nil, err
	}
	c.metrics = m
	c.store.reads = func(k rollout.Kind) { m.reads.WithLabelValues(string(k)).Inc() }
	return c, nil
}

// SetupWithManager registers with mgr a field index of the Secrets and
// ConfigMaps each opted-in workload references, and one controller per workload
// kind (Deployment, StatefulSet, DaemonSet) watching its workloads and, through
// the index, the objects they reference. mgr must have been built with
// c.CacheOptions and c.ClientOptions (hotcert-controller does it).
func (c *Controller) SetupWithManager(mgr manager.Manager) error {
	o := c.opts
	var cacheReader client.Reader = mgr.GetCache()
	c.cacheReader.Store(&cacheReader)
	c.store.cache, c.store.api = mgr.GetCache(), mgr.GetAPIReader()
	if c.webhook != nil {
		c.webhook.useLogger(mgr.GetLogger().WithName("webhook"))
		if err := mgr.Add(c.webhook); err != nil {
			return fmt.Errorf("controller: adding the webhook: %w", err)
		}
	}
	if err := c.setupScope(mgr); err != nil {
		return err
	}
	if o.ReferenceRules {
		if err := c.setupReferenceRules(mgr); err != nil {
			return err
		}
	}
	var watcher *refWatcher
	if o.SecretCache != cacheFull {
		watcher = newRefWatcher(o.SecretCache, c.namespaces, c.scope, c.store, mgr.GetConfig())
		if err := mgr.Add(watcher); err != nil {
			return err
		}
	}
	// core/v1 Events, not events.k8s.io/v1: the latter's recorder folds every
	// Event of the same reason on a workload into one series that keeps the
	// first message, so "Secret a changed" would hide a later "Secret b
	// changed". The core/v1 recorder keeps distinct messages (and aggregates
	// and rate-limits floods); the situations it is fed are deduplicated here.
	c.report = newReporter(mgr.GetEventRecorderFor(rollout.FieldManager), c.metrics) //nolint:staticcheck // see above
	c.shared = &shared{budget: budget.New(o.MaxRollouts, o.BudgetWindow), cache: mgr.GetCache(), kinds: c.kinds}
	var hashOpts []rollout.HashOption
	if o.HashKey != nil {
		hashOpts = append(hashOpts, rollout.WithHashKey(o.HashKey))
	}

	c.hashOpts, c.watcher = hashOpts, watcher
	for _, k := range workloadKinds {
		if _, err := c.setupKind(mgr, k, mgr.GetClient()); err != nil {
			return err
		}
	}
	if c.live != nil {
		c.followTargets(mgr)
	}
	if err := c.setupSubPath(mgr, watcher, hashOpts); err != nil {
		return err
	}
	return nil
}

func metadataObject(kind rollout.Kind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind)))
	return m
}

// setupReferenceRules starts following ReferenceRules (see package
// rollout/chain) in the controller's namespaces.
func (c *Controller) setupReferenceRules(mgr manager.Manager) error {
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("rollout: ReferenceRules: %w", err)
	}
	opts := []referencerules.LiveOption{referencerules.WithLogger(mgr.GetLogger().WithName("referencerules"))}
	ns := ""
	switch {
	case len(c.namespaces) == 1:
		ns = c.namespaces[0]
	case len(c.namespaces) > 1:
		opts = append(opts, referencerules.WithNamespaces(c.namespaces...))
	}
	c.live = referencerules.NewLive(dyn, mgr.GetRESTMapper(), ns, opts...)
	if err := mgr.Add(c.live); err != nil {
		return err
	}
	// The rules' Ready condition, written by the leader.
	return mgr.Add(referencerules.NewStatusWriter(dyn, c.live, mgr.GetLogger().WithName("referencerules")))
}

// chained reports whether a ReferenceRule's chain reaches the workload obj of
// kind.
func (c *Controller) chained(kind string, obj client.Object) bool {
	return c.live != nil && c.live.Runs(kind, obj.GetNamespace(), obj.GetName())
}
