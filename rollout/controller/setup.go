package controller

import (
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/budget"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
)

// Controller is the rollout controller. Build it with New, configure the
// manager with its CacheOptions, NewCache and ClientOptions, then
// SetupWithManager.
type Controller struct {
	opts        Options
	metrics     *metrics
	view        *clusterview.View // what the controller watches and keeps, built once in New
	shared      *shared
	report      *reporter
	cacheReader atomic.Pointer[client.Reader]
	live        *referencerules.Live // nil unless Options.ReferenceRules
	webhook     *webhookServer       // nil unless Options.Webhook.Addr
	// hashOpts and watcher are what every kind's controller is built with
	// (watcher is nil in cacheFull mode); targets, the kinds ReferenceRules
	// declare (see targets.go).
	hashOpts []rollout.HashOption
	watcher  *clusterview.Watcher
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
	c.view = clusterview.New(clusterview.Config{
		Mode:              o.SecretCache.viewMode(),
		Namespaces:        o.Namespaces,
		NamespaceSelector: o.NamespaceSelector,
		WorkloadSelector:  o.WorkloadSelector,
		Managed:           func(obj client.Object) bool { return optedIn(obj) || hasState(obj) },
		IsReferenced:      c.isReferenced,
		Reads:             func(k rollout.Kind) { c.metrics.reads.WithLabelValues(string(k)).Inc() },
		Clock:             o.Clock,
	})
	m, err := newMetrics(o.Registerer, o.MetricsPrefix, o.Clock, func() float64 { return float64(c.view.Store().Len()) })
	if err != nil {
		if c.webhook != nil {
			c.webhook.close()
		}
		return nil, err
	}
	c.metrics = m
	return c, nil
}

// SetupWithManager registers with mgr a field index of the Secrets and
// ConfigMaps each opted-in workload references, and one controller per workload
// kind (Deployment, StatefulSet, DaemonSet) watching its workloads and, through
// the index, the objects they reference. mgr must have been built with
// c.CacheOptions and c.ClientOptions, and with c.NewCache under
// Options.NamespaceSelector (hotcert-controller does it).
func (c *Controller) SetupWithManager(mgr manager.Manager) error {
	o := c.opts
	var cacheReader client.Reader = mgr.GetCache()
	c.cacheReader.Store(&cacheReader)
	c.view.Store().SetReaders(mgr.GetCache(), mgr.GetAPIReader())
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
	if o.SecretCache != cacheFull {
		c.watcher = c.view.NewWatcher(mgr.GetConfig())
		if err := mgr.Add(c.watcher); err != nil {
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

	c.hashOpts = hashOpts
	for _, k := range workloadKinds {
		if _, err := c.setupKind(mgr, k, mgr.GetClient()); err != nil {
			return err
		}
	}
	if c.live != nil {
		c.followTargets(mgr)
	}
	if err := c.setupSubPath(mgr, hashOpts); err != nil {
		return err
	}
	return nil
}

// setupReferenceRules starts following ReferenceRules (see package
// rollout/chain) in the controller's namespaces.
func (c *Controller) setupReferenceRules(mgr manager.Manager) error {
	o := c.opts
	dyn, err := dynamic.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("rollout: ReferenceRules: %w", err)
	}
	opts := []referencerules.LiveOption{referencerules.WithLogger(mgr.GetLogger().WithName("referencerules"))}
	ns := ""
	switch {
	case len(o.Namespaces) == 1:
		ns = o.Namespaces[0]
	case len(o.Namespaces) > 1:
		opts = append(opts, referencerules.WithNamespaces(o.Namespaces...))
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
