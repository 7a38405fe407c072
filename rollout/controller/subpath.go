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
// consumption (see subPathTemplate); subPathIndex maps each consumed object to
// them, and the refWatcher keeps the objects' digests, as it does for opted-in
// workloads. What was last seen of each workload's subPath content is kept in
// memory only: a change made while no controller ran is not warned about.

// subPathIndex is the field index from a Secret or ConfigMap (a
// rollout.RefIndexValue) to the workloads that are not managed and consume one
// of its keys through subPath.
const subPathIndex = "hotcert.dev/subpath"

// eventSubPath (Warning): a key the workload mounts with subPath changed; its
// running pods keep the old content.
const eventSubPath eventReason = "SubPathNotUpdated"

// subPathTemplate is what the cache keeps of the pod template of a workload that
// is not managed: only its volumes that a container mounts with subPath, each
// reduced to what those mounts reach (see subPathVolumes), and no container, so
// that nothing takes it for a whole pod template.
func subPathTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	if len(t.Spec.Containers) == 0 {
		// Reduced already.
		return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: t.Spec.Volumes}}
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: subPathVolumes(&t.Spec)}}
}

// subPathVolumes returns the volumes of spec that a container or init
// container mounts with subPath or subPathExpr, each reduced to the Secret and
// ConfigMap items such mounts reach: the items whose path is the subPath or
// lies under it, or, for a source without items (whose paths are its keys),
// an item for the key the subPath names. subPathExpr is expanded in the pod
// only, so a volume it mounts is kept whole.
func subPathVolumes(spec *corev1.PodSpec) []corev1.Volume {
	paths := map[string][]string{} // volume -> subPaths
	expr := map[string]bool{}      // volume -> mounted with subPathExpr
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, m := range c.VolumeMounts {
				switch {
				case m.SubPathExpr != "":
					expr[m.Name] = true
				case m.SubPath != "":
					paths[m.Name] = append(paths[m.Name], m.SubPath)
				}
			}
		}
	}
	var out []corev1.Volume
	for _, v := range spec.Volumes {
		ps, whole := paths[v.Name], expr[v.Name]
		if len(ps) == 0 && !whole {
			continue
		}
		reduce := func(items []corev1.KeyToPath) []corev1.KeyToPath {
			if whole {
				return items
			}
			return subPathItems(items, ps)
		}
		kept := corev1.Volume{Name: v.Name}
		switch {
		case v.Secret != nil:
			if items := reduce(v.Secret.Items); whole || len(items) > 0 {
				kept.Secret = &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName, Items: items, Optional: v.Secret.Optional}
			}
		case v.ConfigMap != nil:
			if items := reduce(v.ConfigMap.Items); whole || len(items) > 0 {
				kept.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: v.ConfigMap.LocalObjectReference, Items: items, Optional: v.ConfigMap.Optional}
			}
		case v.Projected != nil:
			var srcs []corev1.VolumeProjection
			for _, src := range v.Projected.Sources {
				if s := src.Secret; s != nil {
					if items := reduce(s.Items); whole || len(items) > 0 {
						srcs = append(srcs, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: s.LocalObjectReference, Items: items, Optional: s.Optional}})
					}
				}
				if c := src.ConfigMap; c != nil {
					if items := reduce(c.Items); whole || len(items) > 0 {
						srcs = append(srcs, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: c.LocalObjectReference, Items: items, Optional: c.Optional}})
					}
				}
			}
			if len(srcs) > 0 {
				kept.Projected = &corev1.ProjectedVolumeSource{Sources: srcs}
			}
		}
		if kept.Secret != nil || kept.ConfigMap != nil || kept.Projected != nil {
			out = append(out, kept)
		}
	}
	return out
}

// subPathItems returns the items of a source that the subPaths reach. Without
// items, a source's files are its keys, at its top level (behind the
// kubelet's "..data" link): the key is the subPath's first element.
func subPathItems(items []corev1.KeyToPath, subPaths []string) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for _, p := range subPaths {
		p = strings.TrimPrefix(strings.Trim(p, "/"), "..data/")
		if len(items) == 0 {
			if key, _, _ := strings.Cut(p, "/"); key != "" && !strings.HasPrefix(key, "..") {
				out = append(out, corev1.KeyToPath{Key: key, Path: key})
			}
			continue
		}
		for _, it := range items {
			if path := strings.Trim(it.Path, "/"); path == p || strings.HasPrefix(path, p+"/") {
				out = append(out, it)
			}
		}
	}
	slices.SortFunc(out, func(a, b corev1.KeyToPath) int { return strings.Compare(a.Key+"/"+a.Path, b.Key+"/"+b.Path) })
	return slices.CompactFunc(out, func(a, b corev1.KeyToPath) bool { return a.Key == b.Key && a.Path == b.Path })
}

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
	vols := t.Spec.Volumes
	if len(t.Spec.Containers) > 0 {
		// A whole pod template (not from the cache).
		vols = subPathVolumes(&t.Spec)
	}
	if len(vols) == 0 {
		return nil
	}
	return rollout.PodSpecRefs(&corev1.PodSpec{Volumes: vols})
}

// subPathWatch warns about the subPath consumers of one workload kind.
type subPathWatch struct {
	kind     workloadKind
	cache    client.Reader
	store    *store
	report   *reporter
	hashOpts []rollout.HashOption
	chained  func(kind string, obj client.Object) bool
	shared   *shared // its onLookup hook, for tests

	mu   sync.Mutex
	seen map[string]map[string]string // workload key -> entries of its subPath content, last seen
}

// setupSubPath registers the subPath index and one warning controller per
// workload kind, fed by watcher (nil: the manager's cache watches Secrets and
// ConfigMaps), and makes the store keep the digests of what subPath
// consumers mount.
func (c *Controller) setupSubPath(mgr manager.Manager, watcher *refWatcher, hashOpts []rollout.HashOption) error {
	referenced := c.store.isReferenced
	c.store.isReferenced = func(kind rollout.Kind, ns, name string) bool {
		return referenced(kind, ns, name) || subPathReferenced(mgr.GetCache(), kind, ns, name)
	}
	for _, k := range workloadKinds {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), k.newObj(), subPathIndex, rollout.RefIndexer(subPathRefs)); err != nil {
			return fmt.Errorf("rollout: indexing %ss by subPath consumption: %w", k.name, err)
		}
		w := &subPathWatch{kind: k, cache: mgr.GetCache(), store: c.store, report: c.report, hashOpts: hashOpts,
			chained: c.chained, shared: c.shared, seen: map[string]map[string]string{}}
		mapper := func(kind rollout.Kind) handler.MapFunc { return subPathReferrers(mgr.GetCache(), kind, k) }
		b := ctrl.NewControllerManagedBy(mgr).
			Named("hotcert-subpath-"+strings.ToLower(k.name)).
			For(k.newObj(), builder.WithPredicates(subPathChanges())).
			WithOptions(controller.Options{SkipNameValidation: ptr.To(c.opts.SkipNameValidation)})
		if watcher != nil {
			b = b.WatchesRawSource(&refSource{w: watcher, mapper: mapper})
		} else {
			for _, kind := range []rollout.Kind{rollout.KindSecret, rollout.KindConfigMap} {
				b = b.Watches(newDataObject(kind), handler.EnqueueRequestsFromMapFunc(mapper(kind)),
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
