package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// A workload that is not opted in and mounts a Secret or ConfigMap key with
// subPath never sees that key change: the kubelet bind-mounts the file once,
// when the container starts. The controller warns about it, once per change,
// with a Warning Event on the workload and <prefix>_rollout_subpath_changes_total.
// An opted-in workload needs none of this: it is rolled, and the new pods mount
// the new content.
//
// Such workloads are cached as metadata plus a compact record of their subPath
// consumption (see clusterview.SubPathTemplate); subPathIndex maps each consumed object to
// them, and the cluster view keeps the objects' digests, as it does for opted-in
// workloads. What was last seen of each workload's subPath content is kept in
// memory only: a change made while no controller ran is not warned about.

// subPathIndex is the field index from a Secret or ConfigMap (a
// rollout.RefIndexValue) to the workloads that are not managed and consume one
// of its keys through subPath.
const subPathIndex = "hotcert.dev/subpath"

// eventSubPath (Warning): a key the workload mounts with subPath changed; its
// running pods keep the old content.
const eventSubPath eventReason = "SubPathNotUpdated"

// subPathRefs returns what a workload that is not managed consumes through
// subPath (nil for a managed one: it is rolled).
func subPathRefs(obj client.Object) rollout.Refs {
	if optedIn(obj) || hasState(obj) || obj.GetDeletionTimestamp() != nil {
		return nil
	}
	t := rollout.PodTemplate(obj)
	if t == nil {
		return nil
	}
	// A whole pod template (not from the cache) or one the cache reduced.
	vols := clusterview.SubPathTemplate(t).Spec.Volumes
	if len(vols) == 0 {
		return nil
	}
	return rollout.PodSpecRefs(&corev1.PodSpec{Volumes: vols})
}

// subPathWatch warns about the subPath consumers of one workload kind.
type subPathWatch struct {
	kind     workloadKind
	cache    client.Reader
	store    *clusterview.Store
	report   *reporter
	hashOpts []rollout.HashOption
	chained  func(kind string, obj client.Object) bool
	shared   *shared // its onLookup hook, for tests

	mu   sync.Mutex
	seen map[string]map[string]string // workload key -> entries of its subPath content, last seen
}

// setupSubPath registers the subPath index and one warning controller per
// workload kind, fed by the cluster view's Watcher (none: the manager's cache
// watches Secrets and ConfigMaps). The view keeps the digests of what subPath
// consumers mount (see isReferenced).
func (c *Controller) setupSubPath(mgr manager.Manager, hashOpts []rollout.HashOption) error {
	for _, k := range workloadKinds {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), k.newObj(), subPathIndex, rollout.RefIndexer(subPathRefs)); err != nil {
			return fmt.Errorf("rollout: indexing %ss by subPath consumption: %w", k.name, err)
		}
		w := &subPathWatch{kind: k, cache: mgr.GetCache(), store: c.view.Store(), report: c.report, hashOpts: hashOpts,
			chained: c.chained, shared: c.shared, seen: map[string]map[string]string{}}
		mapper := func(kind rollout.Kind) handler.MapFunc { return subPathReferrers(mgr.GetCache(), kind, k) }
		b := ctrl.NewControllerManagedBy(mgr).
			Named("hotcert-subpath-"+strings.ToLower(k.name)).
			For(k.newObj(), builder.WithPredicates(subPathChanges())).
			WithOptions(controller.Options{SkipNameValidation: ptr.To(c.opts.SkipNameValidation)})
		if c.watcher != nil {
			b = b.WatchesRawSource(c.watcher.Source(mapper))
		} else {
			for _, kind := range []rollout.Kind{rollout.KindSecret, rollout.KindConfigMap} {
				b = b.Watches(clusterview.NewObject(kind), handler.EnqueueRequestsFromMapFunc(mapper(kind)),
					builder.WithPredicates(predicate.ResourceVersionChangedPredicate{}))
			}
		}
		if err := b.Complete(w); err != nil {
			return fmt.Errorf("rollout: building the %s subPath controller: %w", k.name, err)
		}
	}
	return nil
}

// subPathChanges passes the events of subPath consumers, and of workloads
// that just stopped being one (opted in, or mounting otherwise), so that
// what was seen of them is forgotten.
func subPathChanges() predicate.Funcs {
	is := func(obj client.Object) bool { return len(subPathRefs(obj)) > 0 }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return is(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return is(e.ObjectOld) || is(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return is(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return is(e.Object) },
	}
}

// subPathReferenced reports whether a subPath consumer of namespace ns mounts
// the object kind/name.
func subPathReferenced(c client.Reader, kind rollout.Kind, ns, name string) bool {
	for _, k := range workloadKinds {
		list := k.newList()
		err := c.List(context.Background(), list, client.InNamespace(ns),
			client.MatchingFields{subPathIndex: rollout.RefIndexValue(kind, name)}, client.UnsafeDisableDeepCopy)
		if err == nil && len(listed(list)) > 0 {
			return true
		}
	}
	return false
}

// subPathReferrers maps a change of the object kind/name to the subPath
// consumers of kind k that mount it (rollout.MapReferrers, on subPathIndex).
func subPathReferrers(c client.Reader, kind rollout.Kind, k workloadKind) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := k.newList()
		if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{subPathIndex: rollout.RefIndexValue(kind, obj.GetName())}); err != nil {
			log.FromContext(ctx).Error(err, "rollout: listing subPath consumers", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for _, o := range listed(list) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}})
		}
		return reqs
	}
}

func listed(list client.ObjectList) []client.Object {
	var out []client.Object
	eachObject(list, func(o client.Object) { out = append(out, o) })
	return out
}

// Reconcile compares what the workload mounts through subPath with what was
// last seen of it, and warns about each change.
func (w *subPathWatch) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	key := w.kind.name + "/" + req.Namespace + "/" + req.Name
	obj := w.kind.newObj()
	if err := w.cache.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.forget(key)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading %s: %w", key, err)
	}
	refs := subPathRefs(obj)
	if len(refs) == 0 || w.chained(w.kind.name, obj) {
		// Gone from subPath, or managed: it is rolled.
		w.forget(key)
		return reconcile.Result{}, nil
	}
	lookup := w.shared.lookup(ctx, w.store, obj.GetNamespace(), key)
	cfg, err := rollout.Compute(obj.GetNamespace(), refs, lookup, w.hashOpts...)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("resolving what %s mounts with subPath: %w", key, err)
	}
	w.mu.Lock()
	prev := state.State{Keys: w.seen[key]}
	w.seen[key] = cfg.Entries
	w.mu.Unlock()
	if prev.Keys == nil || !prev.Comparable(cfg) {
		return reconcile.Result{}, nil
	}
	changes := prev.Changes(cfg)
	if len(changes) == 0 {
		return reconcile.Result{}, nil
	}
	w.report.metrics.subPath.WithLabelValues(w.kind.name).Inc()
	note := fmt.Sprintf("%s, but this %s mounts it with subPath (%s): its running pods never see the change until they restart. Mount the volume without subPath, or set %s: \"true\" to roll it on change",
		state.Describe(changes, 8), w.kind.name, describeUses(refs), rollout.AnnotationRolloutOnChange)
	w.report.rec.Event(obj, corev1.EventTypeWarning, string(eventSubPath), truncateNote(note))
	return reconcile.Result{}, nil
}

func (w *subPathWatch) forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.seen, key)
}

func describeUses(refs rollout.Refs) string {
	uses := map[string]bool{}
	for _, r := range refs {
		for _, u := range r.Uses {
			uses[u] = true
		}
	}
	return strings.Join(slices.Sorted(maps.Keys(uses)), ", ")
}
