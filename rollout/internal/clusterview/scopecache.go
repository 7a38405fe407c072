package clusterview

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// scopedCache is the manager's cache under a namespace selector: one
// controller-runtime cache per namespace in scope (see nsScope for why),
// created and started when the namespace enters the scope and stopped when it
// leaves, behind the one cache.Cache the manager, its client and the
// controllers use. It is controller-runtime's multi-namespace cache with a set
// of namespaces that changes while it runs: informers, their event handlers
// and field indexes are recorded and replayed onto the cache of every
// namespace that enters; the handlers receive a deletion for each object of a
// namespace that leaves, so that the controllers forget it as they would a
// deleted object. An object of a namespace out of scope is not found.
type scopedCache struct {
	scope   *nsScope
	cfg     *rest.Config
	opts    cache.Options // without namespaces
	cluster cache.Cache   // cluster-scoped objects
	log     logr.Logger

	mu        sync.Mutex
	ctx       context.Context // set by Start
	spaces    map[string]*nsCache
	informers map[string]*scopedInformer // by GVK and object type
	indexes   []fieldIndex
}

type nsCache struct {
	cache.Cache
	cancel context.CancelFunc
	done   chan struct{}
}

type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

var _ cache.Cache = (*scopedCache)(nil)

func newScopedCache(scope *nsScope, cfg *rest.Config, opts cache.Options, log logr.Logger) (*scopedCache, error) {
	opts.DefaultNamespaces = nil
	cluster, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	c := &scopedCache{scope: scope, cfg: cfg, opts: opts, cluster: cluster, log: log,
		spaces: map[string]*nsCache{}, informers: map[string]*scopedInformer{}}
	return c, nil
}

// Start watches the namespaces and runs the cache of each one in scope until
// ctx is done.
func (c *scopedCache) Start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.cluster.Start(gctx) })
	for _, ns := range c.scope.subscribe(c) {
		c.enter(ns)
	}
	g.Go(func() error { return c.scope.run(gctx, c.cfg) })
	err := g.Wait()
	c.mu.Lock()
	spaces := c.spaces
	c.spaces = map[string]*nsCache{}
	c.mu.Unlock()
	for _, s := range spaces {
		s.cancel()
		<-s.done
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// enter creates, wires and starts the cache of a namespace entering the
// scope.
func (c *scopedCache) enter(ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil || c.spaces[ns] != nil {
		return
	}
	o := c.opts
	o.DefaultNamespaces = map[string]cache.Config{ns: {}}
	nc, err := cache.New(c.cfg, o)
	if err != nil {
		// cache.New fails only on bad options, which the cluster cache
		// would have failed on first.
		c.log.Error(err, "cannot watch a namespace that entered the scope", "namespace", ns)
		return
	}
	for _, ix := range c.indexes {
		if err := nc.IndexField(c.ctx, ix.obj, ix.field, ix.extract); err != nil {
			c.log.Error(err, "cannot watch a namespace that entered the scope", "namespace", ns, "index", ix.field)
			return
		}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	s := &nsCache{Cache: nc, cancel: cancel, done: make(chan struct{})}
	c.spaces[ns] = s
	for _, si := range c.informers {
		si.attach(ctx, ns, nc)
	}
	go func() {
		defer close(s.done)
		_ = nc.Start(ctx)
	}()
}

// leave stops the cache of a namespace leaving the scope, after telling the
// handlers that its objects are gone.
func (c *scopedCache) leave(ns string) {
	c.mu.Lock()
	s := c.spaces[ns]
	delete(c.spaces, ns)
	informers := make([]*scopedInformer, 0, len(c.informers))
	for _, si := range c.informers {
		informers = append(informers, si)
	}
	c.mu.Unlock()
	if s == nil {
		return
	}
	for _, si := range informers {
		si.detach(c.ctx, ns, s.Cache)
	}
	s.cancel()
	<-s.done
}

// namespaced reports whether obj's kind is namespaced.
func (c *scopedCache) namespaced(obj runtime.Object) (bool, error) {
	return apiutil.IsObjectNamespaced(obj, c.opts.Scheme, c.opts.Mapper)
}

func (c *scopedCache) space(ns string) cache.Cache {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.spaces[ns]; s != nil {
		return s.Cache
	}
	return nil
}

func (c *scopedCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if ok, err := c.namespaced(obj); err != nil || !ok {
		if err != nil {
			return err
		}
		return c.cluster.Get(ctx, key, obj, opts...)
	}
	s := c.space(key.Namespace)
	if s == nil {
		return apierrors.NewNotFound(c.resource(obj), key.Name)
	}
	return s.Get(ctx, key, obj, opts...)
}

// resource names obj's resource for a NotFound error.
func (c *scopedCache) resource(obj runtime.Object) schema.GroupResource {
	gvk, err := apiutil.GVKForObject(obj, c.opts.Scheme)
	if err != nil {
		return schema.GroupResource{}
	}
	if m, err := c.opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
		return m.Resource.GroupResource()
	}
	return schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}
}

func (c *scopedCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if ok, err := c.namespaced(list); err != nil || !ok {
		if err != nil {
			return err
		}
		return c.cluster.List(ctx, list, opts...)
	}
	lo := client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.Continue != "" || lo.Limit > 0 {
		return errors.New("clusterview: the scoped cache lists without limit or continue")
	}
	if lo.Namespace != "" {
		if s := c.space(lo.Namespace); s != nil {
			return s.List(ctx, list, opts...)
		}
		return apimeta.SetList(list, nil)
	}
	c.mu.Lock()
	spaces := make([]cache.Cache, 0, len(c.spaces))
	for _, s := range c.spaces {
		spaces = append(spaces, s.Cache)
	}
	c.mu.Unlock()
	var all []runtime.Object
	for _, s := range spaces {
		one := list.DeepCopyObject().(client.ObjectList)
		if err := s.List(ctx, one, opts...); err != nil {
			return err
		}
		items, err := apimeta.ExtractList(one)
		if err != nil {
			return err
		}
		all = append(all, items...)
	}
	return apimeta.SetList(list, all)
}

func (c *scopedCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if ok, err := c.namespaced(obj); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return c.cluster.GetInformer(ctx, obj, opts...)
	}
	gvk, err := apiutil.GVKForObject(obj, c.opts.Scheme)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s %T", gvk, obj)
	c.mu.Lock()
	defer c.mu.Unlock()
	if si := c.informers[key]; si != nil {
		return si, nil
	}
	si := &scopedInformer{scope: c.scope, scheme: c.opts.Scheme, log: c.log, obj: obj.DeepCopyObject().(client.Object), opts: opts, per: map[string]cache.Informer{}}
	c.informers[key] = si
	for ns, s := range c.spaces {
		si.attach(c.ctx, ns, s.Cache)
	}
	return si, nil
}

func (c *scopedCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	o, err := c.opts.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("clusterview: %s is not an object", gvk)
	}
	return c.GetInformer(ctx, obj, opts...)
}

func (c *scopedCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	if ok, err := c.namespaced(obj); err != nil || !ok {
		if err != nil {
			return err
		}
		return c.cluster.RemoveInformer(ctx, obj)
	}
	return errors.New("clusterview: the scoped cache does not remove informers")
}

// WaitForCacheSync waits for the first list of namespaces and then for the
// cache of every namespace in scope.
func (c *scopedCache) WaitForCacheSync(ctx context.Context) bool {
	if !c.scope.waitListed(ctx) {
		return false
	}
	c.mu.Lock()
	spaces := make([]cache.Cache, 0, len(c.spaces))
	for _, s := range c.spaces {
		spaces = append(spaces, s.Cache)
	}
	c.mu.Unlock()
	ok := c.cluster.WaitForCacheSync(ctx)
	for _, s := range spaces {
		ok = s.WaitForCacheSync(ctx) && ok
	}
	return ok
}

func (c *scopedCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if ok, err := c.namespaced(obj); err != nil || !ok {
		if err != nil {
			return err
		}
		return c.cluster.IndexField(ctx, obj, field, extract)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for ns, s := range c.spaces {
		if err := s.IndexField(ctx, obj, field, extract); err != nil {
			return fmt.Errorf("clusterview: index %s in namespace %s: %w", field, ns, err)
		}
	}
	c.indexes = append(c.indexes, fieldIndex{obj: obj, field: field, extract: extract})
	return nil
}

// scopedInformer is one informer of a kind over the namespaces in scope: the
// informer of each namespace's cache, with every handler added to each.
type scopedInformer struct {
	scope  *nsScope
	scheme *runtime.Scheme
	log    logr.Logger
	obj    client.Object
	opts   []cache.InformerGetOption

	mu       sync.Mutex
	per      map[string]cache.Informer
	handlers []*scopedRegistration
	indexers []toolscache.Indexers
}

var _ cache.Informer = (*scopedInformer)(nil)

// attach adds the informer of namespace ns's cache, with every handler and
// indexer added so far.
func (si *scopedInformer) attach(ctx context.Context, ns string, nc cache.Cache) {
	// Not blocking: the namespace's cache may be syncing (HasSynced says).
	inf, err := nc.GetInformer(ctx, si.obj, append(slices.Clone(si.opts), cache.BlockUntilSynced(false))...)
	if err != nil {
		si.log.Error(err, "cannot watch a kind in a namespace that entered the scope", "namespace", ns, "kind", fmt.Sprintf("%T", si.obj))
		return
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	si.per[ns] = inf
	for _, ix := range si.indexers {
		_ = inf.AddIndexers(ix)
	}
	for _, h := range si.handlers {
		h.add(ns, inf)
	}
}

// detach removes namespace ns's informer, delivering a deletion of each of
// its objects (as nc, the namespace's cache, holds them) to every handler.
func (si *scopedInformer) detach(ctx context.Context, ns string, nc cache.Cache) {
	si.mu.Lock()
	inf := si.per[ns]
	delete(si.per, ns)
	handlers := append([]*scopedRegistration(nil), si.handlers...)
	si.mu.Unlock()
	if inf == nil {
		return
	}
	objs, err := si.objects(ctx, nc)
	if err != nil {
		si.log.Error(err, "listing the objects of a namespace leaving the scope", "namespace", ns)
	}
	for _, h := range handlers {
		if reg := h.remove(ns); reg != nil {
			_ = inf.RemoveEventHandler(reg)
		}
		for _, obj := range objs {
			h.handler.OnDelete(obj)
		}
	}
}

// objects lists the informer's objects in cache nc.
func (si *scopedInformer) objects(ctx context.Context, nc cache.Cache) ([]runtime.Object, error) {
	gvk, err := apiutil.GVKForObject(si.obj, si.scheme)
	if err != nil {
		return nil, err
	}
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	var list client.ObjectList
	switch si.obj.(type) {
	case *metav1.PartialObjectMetadata:
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(listGVK)
		list = l
	case *unstructured.Unstructured: // a kind a ReferenceRule declares
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		list = l
	default:
		o, err := si.scheme.New(listGVK)
		if err != nil {
			return nil, err
		}
		var ok bool
		if list, ok = o.(client.ObjectList); !ok {
			return nil, fmt.Errorf("clusterview: %s is not a list", listGVK)
		}
	}
	if err := nc.List(ctx, list); err != nil {
		return nil, err
	}
	return apimeta.ExtractList(list)
}

func (si *scopedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return si.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

func (si *scopedInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return si.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

func (si *scopedInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	si.mu.Lock()
	defer si.mu.Unlock()
	r := &scopedRegistration{si: si, handler: h, options: o, per: map[string]toolscache.ResourceEventHandlerRegistration{}}
	for ns, inf := range si.per {
		r.add(ns, inf)
	}
	si.handlers = append(si.handlers, r)
	return r, nil
}

func (si *scopedInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(*scopedRegistration)
	if !ok {
		return fmt.Errorf("clusterview: registration %T is not the scoped cache's", reg)
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	for i, h := range si.handlers {
		if h == r {
			si.handlers = append(si.handlers[:i], si.handlers[i+1:]...)
			break
		}
	}
	for ns, inf := range si.per {
		if one := r.remove(ns); one != nil {
			if err := inf.RemoveEventHandler(one); err != nil {
				return err
			}
		}
	}
	return nil
}

func (si *scopedInformer) AddIndexers(ix toolscache.Indexers) error {
	si.mu.Lock()
	defer si.mu.Unlock()
	for _, inf := range si.per {
		if err := inf.AddIndexers(ix); err != nil {
			return err
		}
	}
	si.indexers = append(si.indexers, ix)
	return nil
}

// HasSynced reports whether the namespaces have been listed and the informer
// of each namespace in scope has synced.
func (si *scopedInformer) HasSynced() bool {
	if !isClosed(si.scope.listed) {
		return false
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	for _, inf := range si.per {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

func (si *scopedInformer) HasSyncedChecker() toolscache.DoneChecker {
	return pollChecker{name: fmt.Sprintf("scoped %T informer", si.obj), synced: si.HasSynced}
}

func (si *scopedInformer) IsStopped() bool {
	si.mu.Lock()
	defer si.mu.Unlock()
	for _, inf := range si.per {
		if !inf.IsStopped() {
			return false
		}
	}
	return true
}

// scopedRegistration is one handler on the informers of every namespace.
type scopedRegistration struct {
	si      *scopedInformer
	handler toolscache.ResourceEventHandler
	options toolscache.HandlerOptions

	mu  sync.Mutex
	per map[string]toolscache.ResourceEventHandlerRegistration
}

func (r *scopedRegistration) add(ns string, inf cache.Informer) {
	reg, err := inf.AddEventHandlerWithOptions(r.handler, r.options)
	if err != nil {
		return // the informer has stopped: its namespace is leaving
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.per[ns] = reg
}

func (r *scopedRegistration) remove(ns string) toolscache.ResourceEventHandlerRegistration {
	r.mu.Lock()
	defer r.mu.Unlock()
	reg := r.per[ns]
	delete(r.per, ns)
	return reg
}

// HasSynced reports whether the namespaces have been listed and the handler
// has received the initial list of every namespace in scope.
func (r *scopedRegistration) HasSynced() bool {
	if !isClosed(r.si.scope.listed) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range r.per {
		if !reg.HasSynced() {
			return false
		}
	}
	return true
}

func (r *scopedRegistration) HasSyncedChecker() toolscache.DoneChecker {
	return pollChecker{name: "scoped handler", synced: r.HasSynced}
}

// pollChecker is a DoneChecker over a set of informers that changes while it
// is waited for: its channel closes once synced reports true (checked every
// 100 ms; the controllers wait on HasSynced, this serves other callers).
type pollChecker struct {
	name   string
	synced func() bool
}

func (p pollChecker) Name() string { return p.name }

func (p pollChecker) Done() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for !p.synced() {
			time.Sleep(100 * time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
