package referencerules

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// Index names of the resolver's informers.
const (
	indexRefs     = "hotcert.dev/chain-refs"     // what an object names: "Secret/ns/name", "group/Kind/ns/name"
	indexWorkName = "hotcert.dev/chain-workname" // "ns/name" of the workload a name rule gives
	indexOwner    = "hotcert.dev/chain-owner"    // workloads by controller owner "group/Kind/ns/name"
)

// WorkloadRef names a workload.
type WorkloadRef struct {
	Kind            string // Deployment, StatefulSet or DaemonSet
	Namespace, Name string
}

func (w WorkloadRef) String() string { return w.Kind + "/" + w.Namespace + "/" + w.Name }

// Consumption is what a workload consumes through the chains that reach it.
type Consumption struct {
	// Refs are the Secrets and ConfigMaps consumed, by namespace (a
	// NamespacedName reference can lead to another namespace), with the keys
	// consumed; each Ref's Uses says through which objects.
	Refs map[string]rollout.Refs
	// Missing lists objects of the chain that are named but do not exist
	// (Kind is "group/Kind"), or are in a namespace the Resolver does not
	// inform (Reason rollout.ReasonOutOfScope): the chain is broken, nothing
	// should roll.
	Missing []rollout.Problem
	// Via lists the objects the workload runs ("kagent.dev/Agent ns/a").
	Via []string
}

// Resolver follows chains of references through dynamic informers of the kinds
// a Graph names (and of the workload kinds its rules use), indexed so that
// both directions are lookups: from a Secret or ConfigMap up to the workloads
// that consume it, and from a workload down to what it consumes.
type Resolver struct {
	graph   *Graph
	factory dynamicinformer.DynamicSharedInformerFactory
	crs     map[schema.GroupKind]cache.SharedIndexInformer
	work    map[string]cache.SharedIndexInformer // by workload kind

	namespace string // the informers' namespace, "" for all

	stop context.CancelFunc

	mu       sync.Mutex
	handlers []func([]WorkloadRef)
}

var workloadGVR = map[string]schema.GroupVersionResource{
	"Deployment":  {Group: "apps", Version: "v1", Resource: "deployments"},
	"StatefulSet": {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"DaemonSet":   {Group: "apps", Version: "v1", Resource: "daemonsets"},
}

// NewResolver builds a resolver for g. mapper maps the graph's kinds to
// resources; namespace restricts the informers to one namespace ("" for all).
func NewResolver(dyn dynamic.Interface, mapper meta.RESTMapper, g *Graph, namespace string) (*Resolver, error) {
	r := &Resolver{
		graph:     g,
		namespace: namespace,
		factory:   dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil),
		crs:       map[schema.GroupKind]cache.SharedIndexInformer{},
		work:      map[string]cache.SharedIndexInformer{},
	}
	for _, gvk := range g.gvks {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("referencerules: %s: %w", gvk, err)
		}
		inf := r.factory.ForResource(m.Resource).Informer()
		n := g.kinds[gvk.GroupKind()]
		if err := inf.AddIndexers(cache.Indexers{
			indexRefs:     func(obj any) ([]string, error) { return refValues(n, obj), nil },
			indexWorkName: func(obj any) ([]string, error) { return workNameValues(n, obj), nil },
		}); err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(r.changeHandler(gvk.GroupKind())); err != nil {
			return nil, err
		}
		r.crs[gvk.GroupKind()] = inf
	}
	for _, gvk := range g.gvks {
		if n := g.kinds[gvk.GroupKind()]; n.work != nil {
			for _, k := range n.work.kinds {
				if r.work[k] != nil {
					continue
				}
				var wi cache.SharedIndexInformer
				if t := g.targets[k]; t != nil {
					// A declared kind is a rule's target: its informer holds
					// whole objects already.
					wi = r.crs[t.GVK.GroupKind()]
				} else {
					wi = r.factory.ForResource(workloadGVR[k]).Informer()
					if err := wi.SetTransform(workloadMetadata); err != nil {
						return nil, err
					}
				}
				if err := wi.AddIndexers(cache.Indexers{indexOwner: ownerValues}); err != nil {
					return nil, err
				}
				if _, err := wi.AddEventHandler(r.workloadHandler(k)); err != nil {
					return nil, err
				}
				r.work[k] = wi
			}
		}
	}
	return r, nil
}

// Start starts the informers, which run until ctx is done or Shutdown is
// called, and waits until they are synced.
func (r *Resolver) Start(ctx context.Context) error { return r.start(ctx, 0) }

// start is Start waiting at most wait (if > 0) for the informers to sync.
func (r *Resolver) start(ctx context.Context, wait time.Duration) error {
	rctx, cancel := context.WithCancel(ctx)
	r.stop = cancel
	r.factory.Start(rctx.Done())
	wctx := rctx
	if wait > 0 {
		var c context.CancelFunc
		wctx, c = context.WithTimeout(rctx, wait)
		defer c()
	}
	var unsynced []schema.GroupVersionResource
	for gvr, ok := range r.factory.WaitForCacheSync(wctx.Done()) {
		if !ok {
			unsynced = append(unsynced, gvr)
		}
	}
	if len(unsynced) > 0 {
		slices.SortFunc(unsynced, func(a, b schema.GroupVersionResource) int { return strings.Compare(a.String(), b.String()) })
		return &UnsyncedError{Resources: unsynced}
	}
	return nil
}

// UnsyncedError is the error of informers that did not sync in time: most
// often, the controller may not list and watch their resources.
type UnsyncedError struct {
	Resources []schema.GroupVersionResource
}

func (e *UnsyncedError) Error() string {
	names := make([]string, len(e.Resources))
	for i, r := range e.Resources {
		names[i] = r.Resource + "." + r.Group
	}
	return fmt.Sprintf("referencerules: the informers of %s did not sync: may the controller list and watch them (RBAC)?", strings.Join(names, ", "))
}

// Shutdown stops the informers and waits until they have stopped.
func (r *Resolver) Shutdown() {
	if r.stop != nil {
		r.stop()
	}
	r.factory.Shutdown()
}

// OnChange registers fn, called with the workloads an object of the graph
// reaches (before and after the change) whenever one is added, changed or
// deleted: an Agent pointed at another ModelConfig, a ModelConfig deleted.
func (r *Resolver) OnChange(fn func([]WorkloadRef)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers = append(r.handlers, fn)
}

func (r *Resolver) changeHandler(gk schema.GroupKind) cache.ResourceEventHandler {
	notify := func(objs ...any) {
		var start []node
		for _, o := range objs {
			if u := asUnstructured(o); u != nil {
				start = append(start, node{gk, u})
			}
		}
		ws := r.reach(start)
		r.mu.Lock()
		hs := slices.Clone(r.handlers)
		r.mu.Unlock()
		if len(ws) > 0 {
			for _, h := range hs {
				h(ws)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { notify(o) },
		UpdateFunc: func(old, o any) {
			ou, nu := asUnstructured(old), asUnstructured(o)
			if ou == nil || nu == nil || ou.GetResourceVersion() != nu.GetResourceVersion() {
				notify(old, o)
			}
		},
		DeleteFunc: func(o any) { notify(o) },
	}
}

// workloadHandler notifies a workload of kind when it appears, or when its
// labels or controller change, and an object of the graph runs it: the
// workload created after its custom resource (an operator's Deployment) must
// be looked at, and the rollout controller's own watch of it may come first,
// before this informer knows it.
func (r *Resolver) workloadHandler(kind string) cache.ResourceEventHandler {
	notify := func(o any) {
		w := asUnstructured(o)
		if w == nil || len(r.runners(kind, w)) == 0 {
			return
		}
		r.mu.Lock()
		hs := slices.Clone(r.handlers)
		r.mu.Unlock()
		ws := []WorkloadRef{{kind, w.GetNamespace(), w.GetName()}}
		for _, h := range hs {
			h(ws)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: notify,
		UpdateFunc: func(old, o any) {
			ou, nu := asUnstructured(old), asUnstructured(o)
			if ou == nil || nu == nil {
				return
			}
			oc, nc := metav1.GetControllerOf(ou), metav1.GetControllerOf(nu)
			if !maps.Equal(ou.GetLabels(), nu.GetLabels()) || (oc == nil) != (nc == nil) || (oc != nil && oc.UID != nc.UID) {
				notify(o)
			}
		},
	}
}

// Runs reports whether an object of the graph runs the workload kind
// namespace/name (and Consumed would return non-nil).
func (r *Resolver) Runs(kind, namespace, name string) bool {
	runners, _ := r.runnersOf(kind, namespace, name)
	return len(runners) > 0
}

// WorkloadsOf returns the workloads that consume the Secret or ConfigMap
// kind namespace/name through a chain of the graph.
func (r *Resolver) WorkloadsOf(kind rollout.Kind, namespace, name string) []WorkloadRef {
	var start []node
	key := string(kind) + "/" + namespace + "/" + name
	for gk, inf := range r.crs {
		objs, _ := inf.GetIndexer().ByIndex(indexRefs, key)
		for _, o := range objs {
			start = append(start, node{gk, o.(*unstructured.Unstructured)})
		}
	}
	return r.reach(start)
}

type node struct {
	gk  schema.GroupKind
	obj *unstructured.Unstructured
}

func (n node) id() string {
	return n.gk.String() + "/" + n.obj.GetNamespace() + "/" + n.obj.GetName()
}

// Workloads returns every workload the graph's objects run.
func (r *Resolver) Workloads() []WorkloadRef {
	var start []node
	for gk, inf := range r.crs {
		for _, o := range inf.GetStore().List() {
			if u := asUnstructured(o); u != nil {
				start = append(start, node{gk, u})
			}
		}
	}
	return r.reach(start)
}

// Declared returns every object of the workload kinds the graph declares: a
// declaration new or changed (another restartAt, pod template or readiness)
// applies to each of them from now on.
func (r *Resolver) Declared() []WorkloadRef {
	var out []WorkloadRef
	for _, t := range r.graph.Targets() {
		inf := r.crs[t.GVK.GroupKind()]
		if inf == nil {
			continue
		}
		for _, o := range inf.GetStore().List() {
			if u := asUnstructured(o); u != nil {
				out = append(out, WorkloadRef{Kind: t.GVK.Kind, Namespace: u.GetNamespace(), Name: u.GetName()})
			}
		}
	}
	return out
}

// reach walks up from start, through referring objects, to the workloads run by
// any object reached.
func (r *Resolver) reach(start []node) []WorkloadRef {
	seen := map[string]bool{}
	found := map[WorkloadRef]bool{}
	queue := start
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n.id()] {
			continue
		}
		seen[n.id()] = true
		kn := r.graph.kinds[n.gk]
		if kn.work != nil {
			for _, w := range r.workloadsOf(kn, n) {
				found[w] = true
			}
		}
		key := gkString(n.gk) + "/" + n.obj.GetNamespace() + "/" + n.obj.GetName()
		for gk, inf := range r.crs {
			objs, _ := inf.GetIndexer().ByIndex(indexRefs, key)
			for _, o := range objs {
				queue = append(queue, node{gk, o.(*unstructured.Unstructured)})
			}
		}
	}
	out := make([]WorkloadRef, 0, len(found))
	for w := range found {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// workloadsOf returns the workloads n runs.
func (r *Resolver) workloadsOf(kn *kindNode, n node) []WorkloadRef {
	var out []WorkloadRef
	ns := n.obj.GetNamespace()
	for _, k := range kn.work.kinds {
		inf := r.work[k]
		switch {
		case kn.work.owner:
			objs, _ := inf.GetIndexer().ByIndex(indexOwner, gkString(n.gk)+"/"+ns+"/"+n.obj.GetName())
			for _, o := range objs {
				w := o.(*unstructured.Unstructured)
				if c := metav1.GetControllerOf(w); c != nil && c.UID == n.obj.GetUID() {
					out = append(out, WorkloadRef{k, ns, w.GetName()})
				}
			}
		case kn.work.name != "":
			name := expand(kn.work.name, n.obj.GetName())
			if _, ok, _ := inf.GetIndexer().GetByKey(ns + "/" + name); ok {
				out = append(out, WorkloadRef{k, ns, name})
			}
		default:
			objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
			for _, o := range objs {
				w := o.(*unstructured.Unstructured)
				if selects(kn.work.selector, n.obj.GetName(), w.GetLabels()) {
					out = append(out, WorkloadRef{k, ns, w.GetName()})
				}
			}
		}
	}
	return out
}

func selects(sel map[string]string, name string, labels map[string]string) bool {
	for k, v := range sel {
		if lv, ok := labels[k]; !ok || lv != expand(v, name) {
			return false
		}
	}
	return true
}

// Consumed returns what the workload kind namespace/name consumes through the
// chains of the graph: nil when no object of the graph runs it.
func (r *Resolver) Consumed(kind, namespace, name string) (*Consumption, error) {
	runners, err := r.runnersOf(kind, namespace, name)
	if len(runners) == 0 || err != nil {
		return nil, err
	}
	cw := &chainWalk{r: r, c: &Consumption{}, refs: map[string]map[refKey]*rollout.Ref{}, seen: map[string]bool{}}
	for _, n := range runners {
		cw.c.Via = append(cw.c.Via, gkString(n.gk)+" "+n.obj.GetNamespace()+"/"+n.obj.GetName())
		cw.visit(n, "")
	}
	cw.c.Refs = sortedRefs(cw.refs)
	return cw.c, nil
}

// runnersOf returns the objects of the graph that run the workload kind
// namespace/name, none when the resolver does not know it.
func (r *Resolver) runnersOf(kind, namespace, name string) ([]node, error) {
	inf := r.work[kind]
	if inf == nil {
		return nil, nil
	}
	o, ok, err := inf.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, err
	}
	return r.runners(kind, o.(*unstructured.Unstructured)), nil
}

// chainWalk is one descent of Consumed, from the objects running a workload
// down the objects they name: what it found consumed (by namespace) or
// missing, and the objects seen.
type chainWalk struct {
	r    *Resolver
	c    *Consumption
	refs map[string]map[refKey]*rollout.Ref
	seen map[string]bool
}

// visit adds what n consumes, then visits the objects it names; via is how
// the walk came to n ("" at a runner).
func (cw *chainWalk) visit(n node, via string) {
	if cw.seen[n.id()] {
		return
	}
	cw.seen[n.id()] = true
	kn := cw.r.graph.kinds[n.gk]
	here := n.gk.Kind + " " + n.obj.GetName()
	if via != "" {
		here = via + " → " + here
	}
	ns := n.obj.GetNamespace()
	for _, d := range kn.data {
		for _, p := range pairs(n.obj.Object, d.name, d.key) {
			addRef(cw.refs, ns, d.kind, p, d.optional, here)
		}
	}
	for _, nr := range kn.names {
		for _, v := range nr.name.values(n.obj.Object) {
			if t := cw.named(ns, nr, v, here); t != nil {
				cw.visit(node{nr.target, t}, here)
			}
		}
	}
}

// named returns the object that value v of field nr, read in namespace ns
// at here, names; or nil, listing it missing, when it is out of the
// resolver's scope or not found.
func (cw *chainWalk) named(ns string, nr nameRef, v, here string) *unstructured.Unstructured {
	tns, tname := nr.split(ns, v)
	if cw.r.namespace != "" && tns != cw.r.namespace {
		// Not informed: "not found" would be a lie.
		cw.c.Missing = append(cw.c.Missing, rollout.Problem{
			Kind: rollout.Kind(gkString(nr.target)), Name: naming.Foreign(tns, tname), Reason: rollout.ReasonOutOfScope,
			Detail: fmt.Sprintf("%s %s/%s, named by %s, is in a namespace this controller does not watch", nr.target.Kind, tns, tname, here),
		})
		return nil
	}
	t, ok, _ := cw.r.crs[nr.target].GetIndexer().GetByKey(tns + "/" + tname)
	if !ok {
		cw.c.Missing = append(cw.c.Missing, rollout.Problem{
			Kind: rollout.Kind(gkString(nr.target)), Name: tns + "/" + tname, Reason: rollout.ReasonMissingObject,
			Detail: fmt.Sprintf("%s %s/%s, named by %s, not found", nr.target.Kind, tns, tname, here),
		})
		return nil
	}
	return t.(*unstructured.Unstructured)
}

// split returns the namespace and name that value v of nr, read in namespace
// ns, names.
func (nr nameRef) split(ns, v string) (string, string) {
	if nr.namespaced {
		if i := strings.IndexByte(v, '/'); i >= 0 {
			return v[:i], v[i+1:]
		}
	}
	return ns, v
}

// sortedRefs turns what a chainWalk found consumed into Consumption.Refs: each
// namespace's Refs sorted by kind and name, their keys and uses sorted.
func sortedRefs(refs map[string]map[refKey]*rollout.Ref) map[string]rollout.Refs {
	out := map[string]rollout.Refs{}
	for ns, m := range refs {
		var rs rollout.Refs
		for _, ref := range m {
			slices.SortFunc(ref.Keys, func(a, b rollout.KeyRef) int { return strings.Compare(a.Key, b.Key) })
			if ref.All {
				ref.Keys = nil
			}
			sort.Strings(ref.Uses)
			rs = append(rs, *ref)
		}
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].Kind != rs[j].Kind {
				return rs[i].Kind < rs[j].Kind
			}
			return rs[i].Name < rs[j].Name
		})
		out[ns] = rs
	}
	return out
}

// runners returns the objects of the graph that run workload w.
func (r *Resolver) runners(kind string, w *unstructured.Unstructured) []node {
	var out []node
	ns := w.GetNamespace()
	if c := metav1.GetControllerOf(w); c != nil {
		if gv, err := schema.ParseGroupVersion(c.APIVersion); err == nil {
			gk := schema.GroupKind{Group: gv.Group, Kind: c.Kind}
			if kn := r.graph.kinds[gk]; kn != nil && kn.work != nil && kn.work.owner && slices.Contains(kn.work.kinds, kind) {
				if o, ok, _ := r.crs[gk].GetIndexer().GetByKey(ns + "/" + c.Name); ok && o.(*unstructured.Unstructured).GetUID() == c.UID {
					out = append(out, node{gk, o.(*unstructured.Unstructured)})
				}
			}
		}
	}
	for gk, kn := range r.graph.kinds {
		if kn.work == nil || kn.work.owner || !slices.Contains(kn.work.kinds, kind) {
			continue
		}
		inf := r.crs[gk]
		if kn.work.name != "" {
			objs, _ := inf.GetIndexer().ByIndex(indexWorkName, ns+"/"+w.GetName())
			for _, o := range objs {
				out = append(out, node{gk, o.(*unstructured.Unstructured)})
			}
			continue
		}
		objs, _ := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		for _, o := range objs {
			u := o.(*unstructured.Unstructured)
			if selects(kn.work.selector, u.GetName(), w.GetLabels()) {
				out = append(out, node{gk, u})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id() < out[j].id() })
	return out
}

// refKey names a referenced object within a namespace.
type refKey struct {
	Kind rollout.Kind
	Name string
}

func addRef(refs map[string]map[refKey]*rollout.Ref, ns string, kind rollout.Kind, p pair, optional bool, use string) {
	m := refs[ns]
	if m == nil {
		m = map[refKey]*rollout.Ref{}
		refs[ns] = m
	}
	k := refKey{Kind: kind, Name: p.name}
	ref := m[k]
	if ref == nil {
		ref = &rollout.Ref{Kind: kind, Name: p.name, Optional: true}
		m[k] = ref
	}
	ref.Optional = ref.Optional && optional
	if p.key == "" {
		ref.All = true
	} else if i := slices.IndexFunc(ref.Keys, func(kr rollout.KeyRef) bool { return kr.Key == p.key }); i >= 0 {
		ref.Keys[i].Optional = ref.Keys[i].Optional && optional
	} else {
		ref.Keys = append(ref.Keys, rollout.KeyRef{Key: p.key, Optional: optional})
	}
	if !slices.Contains(ref.Uses, use) {
		ref.Uses = append(ref.Uses, use)
	}
}

// refValues are an object's index values: what it names.
func refValues(n *kindNode, obj any) []string {
	u := asUnstructured(obj)
	if u == nil {
		return nil
	}
	ns := u.GetNamespace()
	var out []string
	for _, d := range n.data {
		for _, v := range d.name.values(u.Object) {
			out = append(out, string(d.kind)+"/"+ns+"/"+v)
		}
	}
	for _, nr := range n.names {
		for _, v := range nr.name.values(u.Object) {
			tns, tname := nr.split(ns, v)
			out = append(out, gkString(nr.target)+"/"+tns+"/"+tname)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func workNameValues(n *kindNode, obj any) []string {
	u := asUnstructured(obj)
	if u == nil || n.work == nil || n.work.name == "" {
		return nil
	}
	return []string{u.GetNamespace() + "/" + expand(n.work.name, u.GetName())}
}

// workloadMetadata keeps of a workload what the resolver reads — its name,
// labels and owner references — so that the informers of every Deployment,
// StatefulSet and DaemonSet hold no pod templates (the rollout controller keeps
// those it manages in its own cache).
func workloadMetadata(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetNamespace(u.GetNamespace())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	out.SetLabels(u.GetLabels())
	out.SetOwnerReferences(u.GetOwnerReferences())
	return out, nil
}

func ownerValues(obj any) ([]string, error) {
	u := asUnstructured(obj)
	if u == nil {
		return nil, nil
	}
	c := metav1.GetControllerOf(u)
	if c == nil {
		return nil, nil
	}
	gv, err := schema.ParseGroupVersion(c.APIVersion)
	if err != nil {
		return nil, nil
	}
	return []string{gkString(schema.GroupKind{Group: gv.Group, Kind: c.Kind}) + "/" + u.GetNamespace() + "/" + c.Name}, nil
}

func gkString(gk schema.GroupKind) string { return gk.Group + "/" + gk.Kind }

func asUnstructured(obj any) *unstructured.Unstructured {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o
	case cache.DeletedFinalStateUnknown:
		u, _ := o.Obj.(*unstructured.Unstructured)
		return u
	}
	return nil
}

// Referenced reports whether an object of the graph names the Secret or
// ConfigMap kind namespace/name (whether or not a workload consumes it): the
// rollout controller keeps such objects' data in its cache.
func (r *Resolver) Referenced(kind rollout.Kind, namespace, name string) bool {
	key := string(kind) + "/" + namespace + "/" + name
	for _, inf := range r.crs {
		if objs, _ := inf.GetIndexer().ByIndex(indexRefs, key); len(objs) > 0 {
			return true
		}
	}
	return false
}
