package controller

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/budget"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// Controller is the rollout controller. Build it with New, configure the
// manager with its CacheOptions and ClientOptions, then SetupWithManager.
type Controller struct {
	opts        Options
	metrics     *metrics
	store       *store
	shared      *shared
	report      *reporter
	recs        []*reconciler
	namespaces  []string
	cacheReader atomic.Pointer[client.Reader]
	live        *referencerules.Live // nil unless Options.ReferenceRules
	webhook     *webhookServer       // nil unless Options.Webhook.Addr
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
	if o.ReferenceRules {
		if err := c.setupReferenceRules(mgr); err != nil {
			return err
		}
	}
	var watcher *refWatcher
	if o.SecretCache != cacheFull {
		watcher = newRefWatcher(o.SecretCache, c.namespaces, c.store, mgr.GetConfig())
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
	c.shared = &shared{budget: budget.New(o.MaxRollouts, o.BudgetWindow), cache: mgr.GetCache()}
	var hashOpts []rollout.HashOption
	if o.HashKey != nil {
		hashOpts = append(hashOpts, rollout.WithHashKey(o.HashKey))
	}
	m := c.metrics

	for _, k := range workloadKinds {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), k.newObj(), rollout.RefIndex, rollout.RefIndexer(refsOf)); err != nil {
			return fmt.Errorf("rollout: indexing %ss by reference: %w", k.name, err)
		}
		r := &reconciler{
			kind: k, client: mgr.GetClient(), api: mgr.GetAPIReader(), store: c.store, shared: c.shared, report: c.report,
			opts: o, hashOpts: hashOpts, live: c.live, namespaces: c.namespaces,
			waitingSince: map[string]time.Time{}, dryBaseline: map[string]state.State{},
		}
		c.recs = append(c.recs, r)
		name := "hotcert-" + strings.ToLower(k.name)
		b := ctrl.NewControllerManagedBy(mgr).
			Named(name).
			For(k.newObj(), builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
				return optedIn(obj) || hasState(obj) || c.chained(k.name, obj)
			}))).
			WithOptions(controller.Options{
				MaxConcurrentReconciles: o.MaxConcurrentReconciles,
				SkipNameValidation:      ptr.To(o.SkipNameValidation),
				NewQueue: func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
					q := priorityqueue.New(name, func(po *priorityqueue.Opts[reconcile.Request]) {
						po.RateLimiter = rl
						po.Log = mgr.GetLogger().WithValues("controller", name)
					})
					m.queue.set(k.name, q.Len)
					return q
				},
			})
		mapper := func(kind rollout.Kind) handler.MapFunc {
			direct := rollout.MapReferrers(mgr.GetCache(), kind, k.newList)
			if c.live == nil {
				return direct
			}
			chained := c.live.MapData(kind, k.name)
			return func(ctx context.Context, obj client.Object) []reconcile.Request {
				return append(direct(ctx, obj), chained(ctx, obj)...)
			}
		}
		if c.live != nil {
			// Workloads a custom resource change reaches (an Agent repointed, a
			// ModelConfig deleted), and every workload of a new rule graph.
			b = b.WatchesRawSource(c.live.Source(k.name))
		}
		if watcher != nil {
			b = b.WatchesRawSource(&refSource{w: watcher, mapper: mapper})
		} else {
			for _, kind := range []rollout.Kind{rollout.KindSecret, rollout.KindConfigMap} {
				// Resyncs carry the same resourceVersion: nothing changed.
				b = b.Watches(newDataObject(kind), handler.EnqueueRequestsFromMapFunc(mapper(kind)),
					builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
			}
		}
		if err := b.Complete(r); err != nil {
			return fmt.Errorf("rollout: building the %s controller: %w", k.name, err)
		}
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
