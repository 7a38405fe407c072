package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hotcert/hotcert/rollout"
)

// refWatcher watches Secrets and ConfigMaps (every namespace, or the given
// ones) and remembers only the objects an opted-in workload references: for
// each, its uid and resourceVersion and, with CacheReferenced, the digest of
// its keys, computed as the change arrives. An object no opted-in workload
// references costs nothing once its event is handled: no data, no metadata,
// not even its name is kept. (controller-runtime's informer cache would keep
// every object; this is a client-go Reflector feeding refStore instead of a
// cache.)
//
// With CacheReferenced the watch delivers whole objects (the API server sends
// every Secret's data, as it does to Reloader, wave and kagent), so a change of
// a referenced object is digested from its event, with no extra read. With
// CacheMetadata it delivers metadata only, and the data of a referenced object
// is read with one GET when a workload needs its new version.
type refWatcher struct {
	mode       SecretCache
	namespaces []string // empty: all
	store      *store
	restCfg    *rest.Config

	mu       sync.Mutex
	unsynced int           // reflectors that have not listed yet
	synced   chan struct{} // closed once every reflector has listed
	sinks    map[*refSource]workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func newRefWatcher(mode SecretCache, namespaces []string, st *store, cfg *rest.Config) *refWatcher {
	return &refWatcher{mode: mode, namespaces: namespaces, store: st, restCfg: cfg,
		synced: make(chan struct{}), sinks: map[*refSource]workqueue.TypedRateLimitingInterface[reconcile.Request]{}}
}

// Start runs the reflectors until ctx is done (a manager Runnable, on every
// replica: a standby keeps its view warm).
func (w *refWatcher) Start(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(w.restCfg)
	if err != nil {
		return err
	}
	mc, err := metadata.NewForConfig(w.restCfg)
	if err != nil {
		return err
	}
	namespaces := w.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	kinds := []rollout.Kind{rollout.KindSecret, rollout.KindConfigMap}
	w.mu.Lock()
	w.unsynced = len(kinds) * len(namespaces)
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, kind := range kinds {
		for _, ns := range namespaces {
			lw, expected := w.listWatch(cs, mc, kind, ns)
			rs := &refStore{w: w, kind: kind, namespace: ns}
			r := toolscache.NewReflectorWithOptions(lw, expected, rs, toolscache.ReflectorOptions{
				Name: fmt.Sprintf("hotcert %s %s", kind, ns),
			})
			wg.Go(func() { r.RunWithContext(ctx) })
		}
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// NeedLeaderElection: the watch runs on standbys too.
func (w *refWatcher) NeedLeaderElection() bool { return false }

func (w *refWatcher) listWatch(cs kubernetes.Interface, mc metadata.Interface, kind rollout.Kind, ns string) (toolscache.ListerWatcher, runtime.Object) {
	if w.mode == CacheMetadata {
		gvr := corev1.SchemeGroupVersion.WithResource("secrets")
		if kind == rollout.KindConfigMap {
			gvr = corev1.SchemeGroupVersion.WithResource("configmaps")
		}
		r := mc.Resource(gvr).Namespace(ns)
		return &toolscache.ListWatch{
			ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) },
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, o) },
		}, &metav1.PartialObjectMetadata{}
	}
	if kind == rollout.KindSecret {
		r := cs.CoreV1().Secrets(ns)
		return &toolscache.ListWatch{
			ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) },
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, o) },
		}, &corev1.Secret{}
	}
	r := cs.CoreV1().ConfigMaps(ns)
	return &toolscache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return r.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return r.Watch(ctx, o) },
	}, &corev1.ConfigMap{}
}

// changed enqueues the workloads that reference the object, in every
// controller that has started (on a standby, none has: when it becomes the
// leader, its controllers reconcile every workload anyway).
func (w *refWatcher) changed(kind rollout.Kind, ns, name string) {
	stub := metadataObject(kind)
	stub.Namespace, stub.Name = ns, name
	w.mu.Lock()
	defer w.mu.Unlock()
	for src, q := range w.sinks {
		for _, req := range src.mapper(kind)(context.Background(), stub) {
			q.Add(req)
		}
	}
}

func (w *refWatcher) listed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.unsynced > 0 {
		w.unsynced--
		if w.unsynced == 0 {
			close(w.synced)
			if w.mode == CacheReferenced {
				// The initial list decoded every Secret's data only to drop
				// most of it: give that one-off spike back to the OS now
				// rather than let the heap goal keep it resident.
				go debug.FreeOSMemory()
			}
		}
	}
}

// refSource is the controller-runtime source through which a controller
// receives the refWatcher's changes.
type refSource struct {
	w      *refWatcher
	mapper func(rollout.Kind) handler.MapFunc
}

var _ source.SyncingSource = (*refSource)(nil)

// Start registers the controller's queue until ctx is done.
func (s *refSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.w.mu.Lock()
	s.w.sinks[s] = q
	s.w.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.w.mu.Lock()
		delete(s.w.sinks, s)
		s.w.mu.Unlock()
	}()
	return nil
}

// WaitForSync waits for the first list of every reflector, so that the
// controller's first reconciles find the referenced objects digested.
func (s *refSource) WaitForSync(ctx context.Context) error {
	select {
	case <-s.w.synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *refSource) String() string { return "hotcert referenced Secrets and ConfigMaps" }

// refStore is the store a Reflector feeds: it keeps referenced objects only.
type refStore struct {
	w         *refWatcher
	kind      rollout.Kind
	namespace string // "" for all

	once sync.Once
}

var _ toolscache.TransformingStore = (*refStore)(nil)

// Transformer drops the data of objects no workload references as soon as
// they are decoded, so that the reflector's initial list (streamed into a
// temporary store) does not hold every Secret's data at once.
func (s *refStore) Transformer() toolscache.TransformFunc {
	return func(obj any) (any, error) {
		m, err := metaOf(obj)
		if err != nil || s.w.store.isReferenced(s.kind, m.GetNamespace(), m.GetName()) {
			return obj, nil
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		}}, nil
	}
}

func (s *refStore) Add(obj any) error    { return s.Update(obj) }
func (s *refStore) Resync() error        { return nil }
func (s *refStore) Delete(obj any) error { return s.delete(obj) }

func (s *refStore) Update(obj any) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	k := objKey{s.kind, m.GetNamespace(), m.GetName()}
	if !s.w.store.isReferenced(s.kind, k.namespace, k.name) {
		s.w.store.forget(k)
		return nil
	}
	s.w.store.observed(k, m.GetUID(), m.GetResourceVersion(), obj)
	s.w.changed(s.kind, k.namespace, k.name)
	return nil
}

func (s *refStore) delete(obj any) error {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	k := objKey{s.kind, m.GetNamespace(), m.GetName()}
	if s.w.store.forget(k) || s.w.store.isReferenced(s.kind, k.namespace, k.name) {
		s.w.changed(s.kind, k.namespace, k.name)
	}
	return nil
}

// Replace handles a (re)list: every referenced object listed is observed,
// and every one the store knew that is not listed any more is gone.
func (s *refStore) Replace(list []any, _ string) error {
	seen := map[objKey]bool{}
	for _, obj := range list {
		m, err := metaOf(obj)
		if err != nil {
			continue
		}
		k := objKey{s.kind, m.GetNamespace(), m.GetName()}
		seen[k] = true
		if !s.w.store.isReferenced(s.kind, k.namespace, k.name) {
			s.w.store.forget(k)
			continue
		}
		if s.w.store.observed(k, m.GetUID(), m.GetResourceVersion(), obj) {
			s.w.changed(s.kind, k.namespace, k.name)
		}
	}
	for _, k := range s.w.store.keys(s.kind, s.namespace) {
		if !seen[k] {
			s.w.store.forget(k)
			s.w.changed(s.kind, k.namespace, k.name)
		}
	}
	s.once.Do(s.w.listed)
	return nil
}

func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("rollout: unexpected object %T in a watch", obj)
	}
	return m, nil
}
