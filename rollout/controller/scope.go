package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hotcert/hotcert/rollout"
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
// refWatcher). The price is one watch per kind and matching namespace, which
// is what a selector matching a few namespaces of many is for.
type nsScope struct {
	selector labels.Selector
	allowed  map[string]bool // explicit namespaces; nil: any
	restCfg  *rest.Config

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

func newNSScope(sel labels.Selector, explicit []string, cfg *rest.Config) *nsScope {
	s := &nsScope{selector: sel, restCfg: cfg, current: map[string]bool{}, listed: make(chan struct{})}
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

// run watches the namespaces until ctx is done.
func (s *nsScope) run(ctx context.Context) error {
	mc, err := metadata.NewForConfig(s.restCfg)
	if err != nil {
		return fmt.Errorf("controller: namespace selector: %w", err)
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

// eventOutOfScope (Warning): a workload the controller managed left its scope
// (its namespace stopped matching the namespace selector, or its labels the
// workload selector). It is not rolled from then on; its stamp and state
// annotations stay, so if it comes back in scope it is managed from that
// state, as after a controller restart.
const eventOutOfScope eventReason = "OutOfScope"

// setupScope checks that the manager's cache follows the namespace selector
// and adds the scopeReporter, with either selector.
func (c *Controller) setupScope(mgr manager.Manager) error {
	o := c.opts
	if o.NamespaceSelector != nil {
		if _, ok := mgr.GetCache().(*scopedCache); !ok || c.scope == nil {
			return errors.New("controller: a namespace selector needs the manager built with the controller's NewCache")
		}
	}
	if o.NamespaceSelector == nil && o.WorkloadSelector == nil {
		return nil
	}
	return mgr.Add(&scopeReporter{c: c, cache: mgr.GetCache(), api: mgr.GetAPIReader(),
		rec: mgr.GetEventRecorderFor(rollout.FieldManager), log: mgr.GetLogger().WithName("scope")}) //nolint:staticcheck // core/v1 Events, as the reconcilers' (see SetupWithManager)
}

// scopeReporter says so, with an Event and a log line, when a workload the
// controller manages leaves its scope, rather than leave it half-managed
// silently: the workload's watch reports it as deleted (the API server does
// so for an object that stops matching a watch's label selector, and the
// scoped cache for the objects of a namespace that leaves), and a GET tells a
// real deletion from a departure. It runs on the leader only.
type scopeReporter struct {
	c     *Controller
	cache cache.Cache
	api   client.Reader
	rec   record.EventRecorder
	log   logr.Logger
}

func (r *scopeReporter) NeedLeaderElection() bool { return true }

func (r *scopeReporter) Start(ctx context.Context) error {
	for _, k := range workloadKinds {
		inf, err := r.cache.GetInformer(ctx, k.newObj(), cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("controller: watching %ss leave the scope: %w", k.name, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj any) { go r.left(ctx, k, obj) },
		}); err != nil {
			return fmt.Errorf("controller: watching %ss leave the scope: %w", k.name, err)
		}
	}
	<-ctx.Done()
	return nil
}

// left handles the deletion of workload obj of kind k from the cache.
func (r *scopeReporter) left(ctx context.Context, k workloadKind, obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok || !(optedIn(o) || hasState(o)) {
		return
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind(k.name))
	if err := r.api.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
		if !apierrors.IsNotFound(err) {
			r.log.Error(err, "reading a workload that left the cache", "kind", k.name, "namespace", o.GetNamespace(), "name", o.GetName())
		}
		return // deleted, or unknown: nothing to say
	}
	why := ""
	switch {
	case r.c.scope != nil && !r.c.scope.contains(o.GetNamespace()):
		why = fmt.Sprintf("its namespace no longer matches the namespace selector %q", r.c.opts.NamespaceSelector)
	case r.c.opts.WorkloadSelector != nil && !r.c.opts.WorkloadSelector.Matches(labels.Set(live.GetLabels())):
		why = fmt.Sprintf("its labels no longer match the workload selector %q", r.c.opts.WorkloadSelector)
	default:
		return
	}
	msg := "Left the controller's scope: " + why + "; it will not be rolled (its stamp and state annotations stay, and apply again if it comes back in scope)"
	r.log.Info("workload left the scope", "kind", k.name, "namespace", o.GetNamespace(), "name", o.GetName(), "reason", why)
	r.rec.Event(live, corev1.EventTypeWarning, string(eventOutOfScope), msg)
}
