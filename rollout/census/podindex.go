package census

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// podIndex holds the pod records by namespace, fed by the manager's pod
// informer (whose store holds the same records: see CacheOptions). It is the
// census's only way to the pods: the manager's cache cannot List records as
// Pods.
type podIndex struct {
	mu    sync.RWMutex
	byNS  map[string]map[string]*podRecord // namespace -> name -> record
	count int
}

func newPodIndex() *podIndex { return &podIndex{byNS: map[string]map[string]*podRecord{}} }

func (ix *podIndex) put(r *podRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ns := ix.byNS[r.namespace]
	if ns == nil {
		ns = map[string]*podRecord{}
		ix.byNS[r.namespace] = ns
	}
	if _, ok := ns[r.name]; !ok {
		ix.count++
	}
	ns[r.name] = r
}

func (ix *podIndex) remove(r *podRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ns := ix.byNS[r.namespace]
	if _, ok := ns[r.name]; !ok {
		return
	}
	ix.count--
	delete(ns, r.name)
	if len(ns) == 0 {
		delete(ix.byNS, r.namespace)
	}
}

// each calls f with every record of namespace ns (every namespace for ""),
// under the index's read lock: f must not block.
func (ix *podIndex) each(ns string, f func(*podRecord)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ns != "" {
		for _, r := range ix.byNS[ns] {
			f(r)
		}
		return
	}
	for _, m := range ix.byNS {
		for _, r := range m {
			f(r)
		}
	}
}

func (ix *podIndex) len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.count
}

// podSource is the controller's source of pod events: it keeps the index up
// to date from the manager's pod informer, and wakes every TrustRotation
// when a pod changes (the census spaces them, see spacing). The controller
// starts its workers once the index holds every pod the informer listed.
type podSource struct {
	informer cache.Informer
	index    *podIndex
	wake     func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])

	reg  toolscache.ResourceEventHandlerRegistration
	poke chan struct{}
}

// Start registers the handler and runs the loop that turns pokes into
// requests, one round of requests however many pods changed meanwhile.
func (s *podSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.poke = make(chan struct{}, 1)
	poke := func() {
		select {
		case s.poke <- struct{}{}:
		default:
		}
	}
	record := func(obj any) *podRecord {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		r, _ := obj.(*podRecord)
		return r
	}
	reg, err := s.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if r := record(obj); r != nil {
				s.index.put(r)
				poke()
			}
		},
		UpdateFunc: func(_, obj any) {
			if r := record(obj); r != nil {
				s.index.put(r)
				poke()
			}
		},
		DeleteFunc: func(obj any) {
			if r := record(obj); r != nil {
				s.index.remove(r)
				poke()
			}
		},
	})
	if err != nil {
		return fmt.Errorf("census: watching pods: %w", err)
	}
	s.reg = reg
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.poke:
				s.wake(ctx, q)
			}
		}
	}()
	return nil
}

// WaitForSync returns once the index holds every pod of the informer's
// first list.
func (s *podSource) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.reg.HasSynced) {
		return errors.New("census: the pod index did not sync")
	}
	return nil
}

func (s *podSource) String() string { return "census pods" }

// podInformer is the manager's informer of Pods, whose store the census's
// transform fills with records.
func podInformer(ctx context.Context, c cache.Cache) (cache.Informer, error) {
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("census: the pod informer: %w", err)
	}
	return inf, nil
}
