package clusterview

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// nsScope is the set of namespaces the controller watches when it has a
// namespace selector: the namespaces whose labels match it (and, if explicit
// namespaces are given too, that are among them).
//
// Why a watch of Namespaces and per-namespace watches rather than one
// cluster-wide watch filtered here: the API server cannot select objects by
// the labels of their namespace, and controller-runtime's cache takes
// namespace names only, fixed when it is built. A cluster-wide watch would
// make the API server send every Secret of the cluster (data included) to be
// dropped here, which is the cost the selector exists to avoid. So the
// Namespaces are watched, metadata only and with the selector as the watch's
// label selector (the API server sends only matching namespaces, and a
// namespace that stops matching arrives as a deletion), and the Secret,
// ConfigMap and workload watches run per matching namespace: started when a
// namespace starts matching, stopped when it stops (see scopedCache and
// Watcher). The price is one watch per kind and matching namespace, which
// is what a selector matching a few namespaces of many is for.
type nsScope struct {
	selector labels.Selector
	allowed  map[string]bool // explicit namespaces; nil: any

	mu      sync.Mutex
	current map[string]bool

	// notifyMu orders the notifications and subscriptions: a subscriber gets
	// the current set and then every change, none twice, none lost.
	notifyMu  sync.Mutex
	listeners []scopeListener

	listed     chan struct{} // closed once the first list of namespaces is in
	listedOnce sync.Once
}

// scopeListener is told when a namespace enters or leaves the scope. Calls
// are sequential; a listener must not call back into the scope's
// subscription.
type scopeListener interface {
	enter(ns string)
	leave(ns string)
}

func newScope(sel labels.Selector, explicit []string) *nsScope {
	s := &nsScope{selector: sel, current: map[string]bool{}, listed: make(chan struct{})}
	if len(explicit) > 0 {
		s.allowed = map[string]bool{}
		for _, ns := range explicit {
			s.allowed[ns] = true
		}
	}
	return s
}

// subscribe registers l and returns the namespaces in scope now; l is told of
// every change after that.
func (s *nsScope) subscribe(l scopeListener) []string {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	s.listeners = append(s.listeners, l)
	return s.namespaces()
}

// namespaces lists the namespaces in scope, sorted.
func (s *nsScope) namespaces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.current))
}

// contains reports whether ns is in scope.
func (s *nsScope) contains(ns string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current[ns]
}

// run watches the namespaces, on the API server of cfg, until ctx is done.
func (s *nsScope) run(ctx context.Context, cfg *rest.Config) error {
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("clusterview: namespace selector: %w", err)
	}
	r := mc.Resource(corev1.SchemeGroupVersion.WithResource("namespaces"))
	sel := s.selector.String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = sel
			return r.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sel
			return r.Watch(ctx, o)
		},
	}
	rf := toolscache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, (*nsStore)(s),
		toolscache.ReflectorOptions{Name: "hotcert namespaces " + sel})
	rf.RunWithContext(ctx)
	return nil
}

// waitListed waits until the first list of namespaces is in.
func (s *nsScope) waitListed(ctx context.Context) bool {
	select {
	case <-s.listed:
		return true
	case <-ctx.Done():
		return false
	}
}

// set makes the scope the namespaces of names that are allowed, telling the
// listeners what entered and what left.
func (s *nsScope) set(names map[string]bool) {
	s.notifyMu.Lock()
	defer s.notifyMu.Unlock()
	s.mu.Lock()
	var entered, left []string
	for ns := range names {
		if (s.allowed == nil || s.allowed[ns]) && !s.current[ns] {
			s.current[ns] = true
			entered = append(entered, ns)
		}
	}
	for ns := range s.current {
		if !names[ns] {
			delete(s.current, ns)
			left = append(left, ns)
		}
	}
	s.mu.Unlock()
	for _, l := range s.listeners {
		for _, ns := range entered {
			l.enter(ns)
		}
		for _, ns := range left {
			l.leave(ns)
		}
	}
}

// add and remove change one namespace.
func (s *nsScope) add(ns string) {
	names := map[string]bool{ns: true}
	for _, n := range s.namespaces() {
		names[n] = true
	}
	s.set(names)
}

func (s *nsScope) remove(ns string) {
	names := map[string]bool{}
	for _, n := range s.namespaces() {
		names[n] = true
	}
	delete(names, ns)
	s.set(names)
}

// nsStore is the store the Namespace reflector feeds; it keeps names only.
type nsStore nsScope

var _ toolscache.ReflectorStore = (*nsStore)(nil)

func (s *nsStore) Add(obj any) error    { return s.Update(obj) }
func (s *nsStore) Resync() error        { return nil }
func (s *nsStore) Delete(obj any) error { return s.each(obj, (*nsScope)(s).remove) }
func (s *nsStore) Update(obj any) error { return s.each(obj, (*nsScope)(s).add) }

func (s *nsStore) each(obj any, f func(string)) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	f(m.GetName())
	return nil
}

func (s *nsStore) Replace(list []any, _ string) error {
	names := map[string]bool{}
	for _, obj := range list {
		if m, err := metaOf(obj); err == nil {
			names[m.GetName()] = true
		}
	}
	(*nsScope)(s).set(names)
	s.listedOnce.Do(func() { close(s.listed) })
	return nil
}
