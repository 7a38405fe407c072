package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

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
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// setupKind registers with mgr the reference index of kind k's workloads and
// the controller that rolls them, reading and writing through cl: watching
// its workloads, the Secrets and ConfigMaps they reference (through the
// index, or the cluster view's Watcher), and the chains of ReferenceRules that reach
// them. It works before and after mgr has started (a declared kind's
// controller is added when its rule is first in use).
func (c *Controller) setupKind(mgr manager.Manager, k workloadKind, cl client.Client) (*reconciler, error) {
	o, m := c.opts, c.metrics
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), k.newObj(), rollout.RefIndex, rollout.RefIndexer(k.refsOf)); err != nil {
		return nil, fmt.Errorf("rollout: indexing %ss by reference: %w", k.name, err)
	}
	r := &reconciler{
		kind: k, client: cl, api: mgr.GetAPIReader(), store: c.view.Store(), shared: c.shared, report: c.report,
		opts: o, hashOpts: c.hashOpts, live: c.live, namespaces: o.Namespaces,
		waitingSince: map[string]time.Time{}, dryBaseline: map[string]state.State{},
	}
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
	if c.watcher != nil {
		b = b.WatchesRawSource(c.watcher.Source(mapper))
	} else {
		for _, kind := range []rollout.Kind{rollout.KindSecret, rollout.KindConfigMap} {
			// Resyncs carry the same resourceVersion: nothing changed.
			b = b.Watches(clusterview.NewObject(kind), handler.EnqueueRequestsFromMapFunc(mapper(kind)),
				builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
		}
	}
	if err := b.Complete(r); err != nil {
		return nil, fmt.Errorf("rollout: building the %s controller: %w", k.name, err)
	}
	return r, nil
}
