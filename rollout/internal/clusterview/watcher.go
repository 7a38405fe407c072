package clusterview

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
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

// Watcher watches Secrets and ConfigMaps (every namespace, or the given
// ones) and remembers only the objects an opted-in workload references: for
// each, its uid and resourceVersion and, with Referenced, the digest of its
// keys, computed as the change arrives, in the View's Store. An object no
// opted-in workload references costs nothing once its event is handled: no
// data, no metadata, not even its name is kept. (controller-runtime's informer cache would keep
// every object; this is a client-go Reflector feeding refStore instead of a
// cache.)
//
// With Referenced the watch delivers whole objects (the API server sends
// every Secret's data, as it does to Reloader, wave and kagent), so a change of
// a referenced object is digested from its event, with no extra read. With
// Metadata it delivers metadata only, and the data of a referenced object
// is read with one GET when a workload needs its new version.
type Watcher struct {
	mode       Mode
	namespaces []string // empty: all
	scope      *nsScope // with a namespace selector: the namespaces to watch
	store      *Store
	restCfg    *rest.Config

	mu        sync.Mutex
	unsynced  int           // reflectors that have not listed yet
	synced    chan struct{} // closed once every reflector has listed
	sinks     map[*refSource]workqueue.TypedRateLimitingInterface[reconcile.Request]
	gcLowered bool // see lowerGC

	// With a scope: the running reflectors of each namespace in it.
	ctx      context.Context
	cs       kubernetes.Interface
	mc       metadata.Interface
	watching map[string]*nsWatch
}

// nsWatch is the reflectors of one namespace in scope.
type nsWatch struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	pending int // reflectors whose first list the sync waits for
	listed  int // reflectors that have listed
}

// NewWatcher returns the watcher of Secrets and ConfigMaps that feeds v's
// Store, talking to the API server of cfg (a manager Runnable). With Full,
// there is none: the manager's cache watches them.
func (v *View) NewWatcher(cfg *rest.Config) *Watcher {
	st := v.store
	w := &Watcher{mode: v.cfg.Mode, namespaces: v.cfg.Namespaces, scope: v.scope, store: st, restCfg: cfg,
		synced: make(chan struct{}), sinks: map[*refSource]workqueue.TypedRateLimitingInterface[reconcile.Request]{},
		watching: map[string]*nsWatch{}}
	st.trustKnown = w.covers
	return w
}

// covers reports whether the watch has listed the Secrets of namespace ns.
func (w *Watcher) covers(ns string) bool {
	if !isClosed(w.synced) {
		return false
	}
	if w.scope != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		nw := w.watching[ns]
		return nw != nil && nw.pending == 0 && nw.listed >= len(refKinds)
	}
	return len(w.namespaces) == 0 || slices.Contains(w.namespaces, ns)
}

var refKinds = []rollout.Kind{rollout.KindSecret, rollout.KindConfigMap}

// Start runs the reflectors until ctx is done (a manager Runnable, on every
// replica: a standby keeps its view warm): one per kind and namespace given,
// or across all namespaces, or, with a namespace selector, per namespace in
// scope, started and stopped as namespaces enter and leave it.
func (w *Watcher) Start(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(w.restCfg)
	if err != nil {
		return err
	}
	mc, err := metadata.NewForConfig(w.restCfg)
	if err != nil {
		return err
	}
	if w.mode == Referenced {
		w.lowerGC()
	}
	if w.scope != nil {
		return w.startScoped(ctx, cs, mc)
	}
	namespaces := w.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	w.mu.Lock()
	w.unsynced = len(refKinds) * len(namespaces)
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		w.run(ctx, &wg, cs, mc, ns)
	}
	<-ctx.Done()
	wg.Wait()
	w.stopped()
	return nil
}

// stopped undoes what an unfinished initial list left.
func (w *Watcher) stopped() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.restoreGCLocked()
}

// run starts the reflectors of namespace ns.
func (w *Watcher) run(ctx context.Context, wg *sync.WaitGroup, cs kubernetes.Interface, mc metadata.Interface, ns string) {
	for _, kind := range refKinds {
		lw, expected := w.listWatch(cs, mc, kind, ns)
		rs := &refStore{w: w, kind: kind, namespace: ns}
		r := toolscache.NewReflectorWithOptions(lw, expected, rs, toolscache.ReflectorOptions{
			Name: fmt.Sprintf("hotcert %s %s", kind, ns),
		})
		wg.Go(func() { r.RunWithContext(ctx) })
	}
}

// startScoped follows the scope: the watcher is synced once the namespaces
// are listed and the reflectors of those in scope then have listed.
func (w *Watcher) startScoped(ctx context.Context, cs kubernetes.Interface, mc metadata.Interface) error {
	w.mu.Lock()
	w.ctx, w.cs, w.mc = ctx, cs, mc
	w.unsynced = 1 // the namespace list
	w.mu.Unlock()
	for _, ns := range w.scope.subscribe(w) {
		w.enter(ns)
	}
	if w.scope.waitListed(ctx) {
		w.listed("")
	}
	<-ctx.Done()
	w.mu.Lock()
	watching := w.watching
	w.watching = map[string]*nsWatch{}
	w.mu.Unlock()
	for _, nw := range watching {
		nw.cancel()
		nw.wg.Wait()
	}
	w.stopped()
	return nil
}

// enter starts watching a namespace that entered the scope.
func (w *Watcher) enter(ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx == nil || w.watching[ns] != nil {
		return
	}
	ctx, cancel := context.WithCancel(w.ctx)
	nw := &nsWatch{cancel: cancel}
	w.watching[ns] = nw
	if !isClosed(w.synced) {
		nw.pending = len(refKinds)
		w.unsynced += nw.pending
	}
	w.run(ctx, &nw.wg, w.cs, w.mc, ns)
}

// leave stops watching a namespace that left the scope and forgets what was
// kept of its objects.
func (w *Watcher) leave(ns string) {
	w.mu.Lock()
	nw := w.watching[ns]
	delete(w.watching, ns)
	if nw != nil {
		w.listedLocked(nw.pending) // the sync does not wait for it any more
	}
	w.mu.Unlock()
	if nw == nil {
		return
	}
	nw.cancel()
	nw.wg.Wait() // no store call of its reflectors after this
	w.store.dropTrust(ns)
	for _, kind := range refKinds {
		for _, k := range w.store.Keys(kind, ns) {
			w.store.forget(k)
		}
	}
}

// NeedLeaderElection: the watch runs on standbys too.
func (w *Watcher) NeedLeaderElection() bool { return false }

func (w *Watcher) listWatch(cs kubernetes.Interface, mc metadata.Interface, kind rollout.Kind, ns string) (toolscache.ListerWatcher, runtime.Object) {
	if w.mode == Metadata {
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
func (w *Watcher) changed(kind rollout.Kind, ns, name string) {
	stub := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	stub.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(string(kind)))
	w.mu.Lock()
	defer w.mu.Unlock()
	for src, q := range w.sinks {
		for _, req := range src.mapper(kind)(context.Background(), stub) {
			q.Add(req)
		}
	}
}

// listed counts a first list in: of a reflector of namespace ns, or (ns "",
// under a scope) of the namespaces.
func (w *Watcher) listed(ns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.scope != nil && ns != "" {
		nw := w.watching[ns]
		if nw == nil {
			return // left
		}
		nw.listed++
		if nw.pending == 0 {
			return // entered after the sync
		}
		nw.pending--
	}
	w.listedLocked(1)
}

func (w *Watcher) listedLocked(n int) {
	if w.unsynced == 0 || isClosed(w.synced) {
		return
	}
	w.unsynced -= n
	if w.unsynced > 0 {
		return
	}
	close(w.synced)
	if w.mode == Referenced {
		// The initial list decoded every Secret's data only to drop
		// most of it: give that one-off spike back to the OS now
		// rather than let the heap goal keep it resident.
		w.restoreGCLocked()
		go debug.FreeOSMemory()
	}
}

// syncGCPercent is the garbage collector's target during the initial list in
// Referenced mode: the list decodes every Secret's data (500 MiB at
// 50,000 Secrets of which 5% are 200 KiB) to keep almost none of it, so
// the live heap stays small while the default target (100) lets the garbage
// double it between collections. Measured at 50,000 Secrets: peak resident
// memory 128 MiB with 100, 99 MiB with 25 (the steady size, 62 MiB, is the
// same), for about 2 s more of initial sync. The previous setting (GOGC)
// is restored once synced, and a lower one is kept.
const syncGCPercent = 25

// syncGC holds the lowered target while any watcher of the process lists.
var syncGC struct {
	mu   sync.Mutex
	n    int
	prev int
}

// lowerGC lowers the garbage collector's target until the initial list is in
// (see syncGCPercent); restoreGC undoes it, once.
func (w *Watcher) lowerGC() {
	w.mu.Lock()
	defer w.mu.Unlock()
	syncGC.mu.Lock()
	defer syncGC.mu.Unlock()
	if syncGC.n == 0 {
		syncGC.prev = debug.SetGCPercent(syncGCPercent)
		if syncGC.prev < syncGCPercent { // lower already, or off (-1): leave it
			debug.SetGCPercent(syncGC.prev)
		}
	}
	syncGC.n++
	w.gcLowered = true
}

func (w *Watcher) restoreGCLocked() {
	if !w.gcLowered {
		return
	}
	w.gcLowered = false
	syncGC.mu.Lock()
	defer syncGC.mu.Unlock()
	if syncGC.n--; syncGC.n == 0 {
		debug.SetGCPercent(syncGC.prev)
	}
}

// Source returns the controller-runtime source through which a controller
// receives the watcher's changes: mapper(kind) maps a changed object of kind
// to the controller's requests.
func (w *Watcher) Source(mapper func(rollout.Kind) handler.MapFunc) source.SyncingSource {
	return &refSource{w: w, mapper: mapper}
}

// refSource is the controller-runtime source through which a controller
// receives the Watcher's changes.
type refSource struct {
	w      *Watcher
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
	w         *Watcher
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
		stub := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		}}
		if v, ok := m.GetAnnotations()[rollout.AnnotationTrustedBy]; ok && s.kind == rollout.KindSecret {
			stub.Annotations = map[string]string{rollout.AnnotationTrustedBy: v}
		}
		return stub, nil
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
	k := Key{Kind: s.kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	s.trust(m)
	if !s.w.store.isReferenced(s.kind, k.Namespace, k.Name) {
		s.w.store.forget(k)
		return nil
	}
	s.w.store.observed(k, m.GetUID(), m.GetResourceVersion(), obj)
	s.w.changed(s.kind, k.Namespace, k.Name)
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
	k := Key{Kind: s.kind, Namespace: m.GetNamespace(), Name: m.GetName()}
	if s.kind == rollout.KindSecret {
		s.w.store.setTrust(k.Namespace, k.Name, "")
	}
	if s.w.store.forget(k) || s.w.store.isReferenced(s.kind, k.Namespace, k.Name) {
		s.w.changed(s.kind, k.Namespace, k.Name)
	}
	return nil
}

// Replace handles a (re)list: every referenced object listed is observed,
// and every one the store knew that is not listed any more is gone.
func (s *refStore) Replace(list []any, _ string) error {
	seen := map[Key]bool{}
	if s.kind == rollout.KindSecret {
		s.w.store.dropTrust(s.namespace)
	}
	for _, obj := range list {
		m, err := metaOf(obj)
		if err != nil {
			continue
		}
		k := Key{Kind: s.kind, Namespace: m.GetNamespace(), Name: m.GetName()}
		seen[k] = true
		s.trust(m)
		if !s.w.store.isReferenced(s.kind, k.Namespace, k.Name) {
			s.w.store.forget(k)
			continue
		}
		if s.w.store.observed(k, m.GetUID(), m.GetResourceVersion(), obj) {
			s.w.changed(s.kind, k.Namespace, k.Name)
		}
	}
	for _, k := range s.w.store.Keys(s.kind, s.namespace) {
		if !seen[k] {
			s.w.store.forget(k)
			s.w.changed(s.kind, k.Namespace, k.Name)
		}
	}
	s.once.Do(func() { s.w.listed(s.namespace) })
	return nil
}

// trust records the trusted-by declaration of a Secret (or its absence).
func (s *refStore) trust(m metav1.Object) {
	if s.kind == rollout.KindSecret {
		s.w.store.setTrust(m.GetNamespace(), m.GetName(), m.GetAnnotations()[rollout.AnnotationTrustedBy])
	}
}

func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("clusterview: unexpected object %T in a watch", obj)
	}
	return m, nil
}
