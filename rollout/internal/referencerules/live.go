package referencerules

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// Live keeps a Resolver in step with the cluster's ReferenceRules: whenever a
// rule is added, changed or deleted it compiles them all again, starts a new
// Resolver, waits for its informers, swaps it in and stops the old one. Rules
// that do not compile, or name kinds the API server does not serve, keep the
// previous Resolver and are retried; Err says why. It is a manager.Runnable.
type Live struct {
	dyn       dynamic.Interface
	mapper    meta.RESTMapper
	namespace string
	logger    logr.Logger
	inScope   func(namespace string) bool // nil: every namespace

	cur     atomic.Pointer[Resolver]
	lastErr atomic.Pointer[error]
	// windows: the rules' rollout windows, by target (see Windows).
	windows atomic.Pointer[map[string]ruleWindows]
	// Start's goroutine only: the signature of the rules cur was built from,
	// and those of them set aside because their informers did not sync
	// (retried at every attempt).
	applied string
	stuck   map[string]error
	// schemas: what the CRDs say of each rule's rollout field (checkSchemas).
	schemas map[string]SchemaCheck

	mu        sync.Mutex
	handlers  []func([]WorkloadRef)
	onRules   []func([]RuleState)
	onTargets []func([]*Target)
}

// OnTargets registers fn, called with the declared workload kinds (see
// Graph.Targets) every time a new graph is in use, before its workloads are
// reported to OnChange's functions.
func (l *Live) OnTargets(fn func([]*Target)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onTargets = append(l.onTargets, fn)
}

// Targets returns the declared workload kinds of the graph in use.
func (l *Live) Targets() []*Target {
	if r := l.Resolver(); r != nil {
		return r.graph.Targets()
	}
	return nil
}

// RuleState is what Live made of one ReferenceRule at its latest attempt.
type RuleState struct {
	Name       string
	Generation int64
	// Err says why the rule is not applied, nil when it is: its own error (it
	// does not compile, names a kind the API server does not serve, or is about
	// a kind an older rule describes), or that of the whole graph (an informer
	// that does not sync), in which case the previous rules stay in use.
	Err error
	// Schema, for a rule whose rollout declares a CRD's kind, says whether
	// the CRD's schema keeps the field a rollout writes.
	Schema SchemaCheck
}

// OnRules registers fn, called after every attempt to apply the rules with
// what became of each (StatusWriter writes it to the rules' status).
func (l *Live) OnRules(fn func([]RuleState)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onRules = append(l.onRules, fn)
}

// reportRules reports each rule's own error (bad), or else err, the error of
// the graph as a whole.
func (l *Live) reportRules(objs []any, bad map[string]error, err error) {
	if err != nil {
		err = fmt.Errorf("%w; the previous rules stay in use", err)
	}
	states := make([]RuleState, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			st := RuleState{Name: u.GetName(), Generation: u.GetGeneration(), Err: err, Schema: l.schemas[u.GetName()]}
			if e := bad[u.GetName()]; e != nil {
				st.Err, st.Schema = e, SchemaCheck{}
			}
			states = append(states, st)
		}
	}
	l.mu.Lock()
	fns := slices.Clone(l.onRules)
	l.mu.Unlock()
	for _, fn := range fns {
		fn(states)
	}
}

// crdSyncWarning is how long Live waits for the first list of ReferenceRules
// before it logs that it cannot list them (a variable for tests).
var crdSyncWarning = 30 * time.Second

// ReferenceRules is the resource of v1alpha1.ReferenceRule.
var ReferenceRules = v1alpha1.GroupVersion.WithResource("referencerules")

// LiveOption configures a Live.
type LiveOption interface{ applyLive(*Live) }

type liveOptionFunc func(*Live)

func (f liveOptionFunc) applyLive(l *Live) { f(l) }

// WithLogger makes Live log, once each, the rules it starts following, the
// rules it cannot use and why, and a ReferenceRule CRD it cannot list (default:
// no logging).
func WithLogger(l logr.Logger) LiveOption {
	return liveOptionFunc(func(lv *Live) { lv.logger = l })
}

// WithNamespaces restricts the workloads Live reports through MapData and
// Source to these namespaces (for a controller that watches several
// namespaces; its Resolvers then inform in all of them).
func WithNamespaces(namespaces ...string) LiveOption {
	return liveOptionFunc(func(l *Live) {
		set := map[string]bool{}
		for _, ns := range namespaces {
			set[ns] = true
		}
		l.inScope = func(ns string) bool { return set[ns] }
	})
}

// NewLive returns a Live that follows ReferenceRules through dyn; its
// Resolvers inform in namespace ("" for all).
func NewLive(dyn dynamic.Interface, mapper meta.RESTMapper, namespace string, opts ...LiveOption) *Live {
	l := &Live{dyn: dyn, mapper: mapper, namespace: namespace, logger: logr.Discard()}
	for _, o := range opts {
		o.applyLive(l)
	}
	return l
}

// NeedLeaderElection: Live runs on standby replicas too, so that a new leader
// starts with its graph ready.
func (l *Live) NeedLeaderElection() bool { return false }

// Ready reports whether a graph is in use: the ReferenceRules were listed and
// compiled at least once (with no rules, an empty graph).
func (l *Live) Ready() bool { return l.cur.Load() != nil }

// Resolver returns the current Resolver, nil before the first rules compiled.
func (l *Live) Resolver() *Resolver { return l.cur.Load() }

// Err returns why the latest rules are not in use, nil when they are.
func (l *Live) Err() error {
	if p := l.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// OnChange registers fn, called with the workloads to look at again: those a
// custom resource change reaches (see Resolver.OnChange), and every workload of
// the new graph when the rules change.
func (l *Live) OnChange(fn func([]WorkloadRef)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handlers = append(l.handlers, fn)
}

func (l *Live) notify(ws []WorkloadRef) {
	l.mu.Lock()
	hs := slices.Clone(l.handlers)
	l.mu.Unlock()
	for _, h := range hs {
		h(ws)
	}
}

// crdPollInterval is how often Live looks for the ReferenceRule CRD while it
// is not installed: one discovery request, instead of an informer that retries
// a list the API server cannot serve (and logs it) every few seconds.
var crdPollInterval = 30 * time.Second

var referenceRuleKind = v1alpha1.GroupVersion.WithKind("ReferenceRule")

// waitForCRD returns once the ReferenceRule CRD is served (true) or ctx is done
// (false). While it is not, it says so once, then looks again every
// crdPollInterval.
func (l *Live) waitForCRD(ctx context.Context) bool {
	absent := false
	for {
		if rm, ok := l.mapper.(interface{ Reset() }); ok && absent {
			rm.Reset()
		}
		_, err := l.mapper.RESTMapping(referenceRuleKind.GroupKind(), referenceRuleKind.Version)
		switch {
		case err == nil:
			if absent {
				l.logger.Info("the ReferenceRule CRD is installed now: following ReferenceRules")
			}
			return true
		case !meta.IsNoMatchError(err):
			// Discovery failed (the API server restarting?): the informer
			// will say what it is.
			return true
		case !absent:
			l.logger.Info("the ReferenceRule CRD (referencerules.hotcert.dev) is not installed: workloads reached through custom resources are not rolled until it is; looking for it again periodically",
				"every", crdPollInterval.String())
			absent = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(crdPollInterval):
		}
	}
}

// Start follows the ReferenceRules until ctx is done. Without the
// ReferenceRule CRD, it waits for it.
func (l *Live) Start(ctx context.Context) error {
	if !l.waitForCRD(ctx) {
		return nil
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(l.dyn, 0)
	inf := f.ForResource(ReferenceRules).Informer()
	kick := make(chan struct{}, 1)
	signal := func(any) {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: signal, DeleteFunc: signal,
		UpdateFunc: func(o, n any) { signal(n) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	warn := time.AfterFunc(crdSyncWarning, func() {
		l.logger.Error(nil, "cannot list ReferenceRules: is the CRD referencerules.hotcert.dev installed, and may the controller list it? Workloads reached through custom resources are not rolled until then",
			"waited", crdSyncWarning.String())
	})
	synced := cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	warn.Stop()
	if !synced {
		return nil // ctx ended
	}
	signal(nil)
	retry := time.Second
	var timer <-chan time.Time
	defer func() {
		if r := l.cur.Swap(nil); r != nil {
			r.Shutdown()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-timer:
		}
		timer = nil
		objs := inf.GetStore().List()
		bad, err := l.rebuild(ctx, objs)
		if ctx.Err() != nil {
			return nil
		}
		l.reportRules(objs, bad, err)
		if err == nil && len(bad) > 0 {
			// The other rules are in use; retry these (a CRD installed later).
			err = setAside(bad)
		}
		if err != nil {
			if prev := l.Err(); prev == nil || prev.Error() != err.Error() {
				l.logger.Error(err, "ReferenceRules not applied; the previous ones stay in use", "retry_in", retry.String())
			}
			l.lastErr.Store(&err)
			timer = time.After(retry)
			retry = min(2*retry, time.Minute)
			continue
		}
		l.lastErr.Store(nil)
		retry = time.Second
	}
}

// rebuild applies the rules of objs: it sets aside, with their own errors
// (bad), the rules that cannot be used, and makes a Resolver of the others,
// unless they are the ones in use already (a status update, a retry). err is
// why the graph could not be built; the previous one then stays.
func (l *Live) rebuild(ctx context.Context, objs []any) (bad map[string]error, err error) {
	bad = map[string]error{}
	rules := make([]v1alpha1.ReferenceRule, 0, len(objs))
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		var r v1alpha1.ReferenceRule
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
			bad[u.GetName()] = fmt.Errorf("referencerules: ReferenceRule %s: %w", u.GetName(), err)
			continue
		}
		rules = append(rules, r)
	}
	if rm, ok := l.mapper.(interface{ Reset() }); ok {
		rm.Reset() // a rule may name a CRD installed since
	}
	rules = l.sortOut(rules, bad)
	l.setWindows(rules)
	l.checkSchemas(ctx, rules)
	sig := signature(rules)
	if l.cur.Load() != nil && sig == l.applied && len(l.stuck) == 0 {
		return bad, nil // nothing new, nothing to retry
	}
	r, stuck, err := l.start(ctx, rules)
	maps.Copy(bad, stuck)
	if err != nil {
		return bad, err
	}
	l.applied, l.stuck = sig, stuck
	var kinds []string
	for _, gvk := range r.graph.gvks {
		kinds = append(kinds, gvk.GroupKind().String())
	}
	l.logger.Info("following ReferenceRules", "rules", len(rules)-len(stuck), "kinds", kinds)
	l.mu.Lock()
	fns := slices.Clone(l.onTargets)
	l.mu.Unlock()
	for _, fn := range fns {
		fn(r.graph.Targets())
	}
	old := l.cur.Swap(r)
	if old != nil {
		old.Shutdown()
		l.notify(old.Workloads())
	}
	l.notify(r.Workloads())
	// Objects of a declared kind that are opted in, not reached by a chain:
	// a change that waits for a fixed rule (a restartAt the schema pruned)
	// rolls now.
	l.notify(r.Declared())
	return bad, nil
}

// start builds and starts a Resolver of rules. When informers do not sync, it
// sets aside (stuck) the rules that name their kinds and tries again without
// them; an informer it cannot blame on a rule (a workload kind's) fails the
// graph.
func (l *Live) start(ctx context.Context, rules []v1alpha1.ReferenceRule) (_ *Resolver, stuck map[string]error, _ error) {
	stuck = map[string]error{}
	for {
		g, err := Compile(rules)
		if err != nil {
			return nil, stuck, err
		}
		r, err := NewResolver(l.dyn, l.mapper, g, l.namespace)
		if err != nil {
			return nil, stuck, err
		}
		r.OnChange(l.notify)
		err = r.start(ctx, resolverSyncTimeout)
		if err == nil {
			return r, stuck, nil
		}
		r.Shutdown()
		var unsynced *UnsyncedError
		if !errors.As(err, &unsynced) || ctx.Err() != nil {
			return nil, stuck, err
		}
		var kept []v1alpha1.ReferenceRule
		for _, rule := range rules {
			if res := l.blocked(rule, unsynced.Resources); res != "" {
				stuck[rule.Name] = fmt.Errorf("referencerules: rule %s: the informer of %s did not sync: may the controller list and watch it (RBAC)?", rule.Name, res)
				continue
			}
			kept = append(kept, rule)
		}
		if len(kept) == len(rules) {
			return nil, stuck, err
		}
		rules = kept
	}
}

// blocked returns the first of the resources that rule names, "" if none.
func (l *Live) blocked(rule v1alpha1.ReferenceRule, resources []schema.GroupVersionResource) string {
	g, err := compile([]v1alpha1.ReferenceRule{rule}, anyKind)
	if err != nil {
		return ""
	}
	for _, gvk := range g.Kinds() {
		m, err := l.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue
		}
		if slices.Contains(resources, m.Resource) {
			return m.Resource.Resource + "." + m.Resource.Group
		}
	}
	return ""
}

// resolverSyncTimeout bounds the wait for a new Resolver's informers.
var resolverSyncTimeout = 30 * time.Second

// sortOut returns the rules that can be used together, in name order, and
// records in bad why each other one cannot: it does not compile on its own,
// names a kind the API server does not serve, or is about a kind that an
// older rule (by creation, then name) is about.
func (l *Live) sortOut(rules []v1alpha1.ReferenceRule, bad map[string]error) []v1alpha1.ReferenceRule {
	slices.SortFunc(rules, func(a, b v1alpha1.ReferenceRule) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	owner := map[schema.GroupKind]string{}
	workloadKindOwner := map[string]string{} // declared workload kinds, by name
	declared := declaredKinds(rules)
	var ok []v1alpha1.ReferenceRule
	for _, r := range rules {
		g, err := compile([]v1alpha1.ReferenceRule{r}, func(k string) bool { return declared[k] })
		if err != nil {
			bad[r.Name] = err
			continue
		}
		target := r.Spec.Target.GVK().GroupKind()
		if o, taken := owner[target]; taken {
			bad[r.Name] = fmt.Errorf("referencerules: rules %s and %s are both about %s: %s, the older, is used", o, r.Name, target, o)
			continue
		}
		if o, taken := workloadKindOwner[target.Kind]; taken && r.Spec.Rollout != nil {
			bad[r.Name] = fmt.Errorf("referencerules: rules %s and %s both declare a workload kind named %s: %s, the older, is used (workload kinds are told apart by name)", o, r.Name, target.Kind, o)
			continue
		}
		var unserved error
		for _, gvk := range g.Kinds() {
			if _, err := l.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				unserved = fmt.Errorf("referencerules: rule %s: %s is not served: %w", r.Name, gvk, err)
				break
			}
		}
		if unserved != nil {
			bad[r.Name] = unserved
			continue
		}
		owner[target] = r.Name
		if r.Spec.Rollout != nil {
			workloadKindOwner[target.Kind] = r.Name
		}
		ok = append(ok, r)
	}
	slices.SortFunc(ok, func(a, b v1alpha1.ReferenceRule) int { return strings.Compare(a.Name, b.Name) })
	return withoutUndeclared(ok, bad)
}

// withoutUndeclared sets aside, until none is left, the rules whose workloads
// name a kind that only a rule set aside declares.
func withoutUndeclared(rules []v1alpha1.ReferenceRule, bad map[string]error) []v1alpha1.ReferenceRule {
	for {
		declared := declaredKinds(rules)
		kept := rules[:0:0]
		for _, r := range rules {
			if w := r.Spec.Workloads; w != nil {
				if i := slices.IndexFunc(w.Kinds, func(k string) bool { return !slices.Contains(WorkloadKinds, k) && !declared[k] }); i >= 0 {
					bad[r.Name] = fmt.Errorf("referencerules: rule %s: workload kind %s is declared by no rule in use", r.Name, w.Kinds[i])
					continue
				}
			}
			kept = append(kept, r)
		}
		if len(kept) == len(rules) {
			return kept
		}
		rules = kept
	}
}

// signature identifies a set of rules at their generations.
func signature(rules []v1alpha1.ReferenceRule) string {
	var b strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&b, "%s@%d,", r.Name, r.Generation)
	}
	return b.String()
}

// setAside is the error of the rules set aside while the others are in use.
func setAside(bad map[string]error) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(bad)) {
		errs = append(errs, bad[name])
	}
	return fmt.Errorf("referencerules: %d ReferenceRule(s) set aside, the others are in use: %w", len(bad), errors.Join(errs...))
}

// WorkloadsOf is Resolver.WorkloadsOf on the current Resolver.
func (l *Live) WorkloadsOf(kind rollout.Kind, namespace, name string) []WorkloadRef {
	if r := l.Resolver(); r != nil {
		return r.WorkloadsOf(kind, namespace, name)
	}
	return nil
}

// Consumed is Resolver.Consumed on the current Resolver.
func (l *Live) Consumed(kind, namespace, name string) (*Consumption, error) {
	if r := l.Resolver(); r != nil {
		return r.Consumed(kind, namespace, name)
	}
	return nil, nil
}

// MapData returns a handler.MapFunc from an event on a Secret or ConfigMap of
// kind data to a request for each workload of kind workloadKind that consumes
// it through a chain: add it beside the controller's pod-spec map function.
func (l *Live) MapData(data rollout.Kind, workloadKind string) handler.MapFunc {
	return func(_ context.Context, obj client.Object) []reconcile.Request {
		return l.requests(l.WorkloadsOf(data, obj.GetNamespace(), obj.GetName()), workloadKind)
	}
}

// Source returns a controller-runtime source that enqueues the workloads of
// kind workloadKind that OnChange reports, and, when it starts, those the
// graph in use reaches already: a controller started for a kind that a new
// graph declares may start after that graph reported its workloads.
func (l *Live) Source(workloadKind string) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		if ctx.Err() != nil {
			return errors.New("referencerules: source started after its context ended")
		}
		l.OnChange(func(ws []WorkloadRef) {
			for _, req := range l.requests(ws, workloadKind) {
				q.Add(req)
			}
		})
		if r := l.Resolver(); r != nil {
			for _, req := range l.requests(r.Workloads(), workloadKind) {
				q.Add(req)
			}
		}
		return nil
	})
}

// Runs is Resolver.Runs on the current Resolver.
func (l *Live) Runs(kind, namespace, name string) bool {
	if r := l.Resolver(); r != nil {
		return r.Runs(kind, namespace, name)
	}
	return false
}

func (l *Live) requests(ws []WorkloadRef, kind string) []reconcile.Request {
	var out []reconcile.Request
	for _, w := range ws {
		if w.Kind == kind && (l.inScope == nil || l.inScope(w.Namespace)) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.Namespace, Name: w.Name}})
		}
	}
	return out
}

// Referenced is Resolver.Referenced on the current Resolver.
func (l *Live) Referenced(kind rollout.Kind, namespace, name string) bool {
	if r := l.Resolver(); r != nil {
		return r.Referenced(kind, namespace, name)
	}
	return false
}
