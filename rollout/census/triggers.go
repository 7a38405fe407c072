package census

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// A change of a trust object or server certificate triggers a census at
// once, not at the next interval: for each object name a rotation reads, a
// metadata-only watch selected by that name (in every namespace: a
// trust-manager Bundle's targets share its name) wakes the rotations that
// read it. It keeps the metadata of those objects only, never their data,
// and asks for no permission the rollout controller does not hold already
// (list and watch on ConfigMaps and Secrets).

// trigger names a watched object: a resource and a name.
type trigger struct {
	resource string // configmaps, secrets, clustertrustbundles
	name     string
}

var triggerGVR = map[string]schema.GroupVersionResource{
	"configmaps":          {Version: "v1", Resource: "configmaps"},
	"secrets":             {Version: "v1", Resource: "secrets"},
	"clustertrustbundles": {Group: "certificates.k8s.io", Version: "v1", Resource: "clustertrustbundles"},
}

// triggers keeps one name-selected metadata watch per trigger in use.
type triggers struct {
	meta   metadata.Interface
	events chan event.GenericEvent

	mu        sync.Mutex
	watches   map[trigger]chan struct{} // its stop channel
	rotations map[trigger]map[string]bool
	of        map[string][]trigger // rotation -> its triggers
}

func newTriggers(meta metadata.Interface) *triggers {
	return &triggers{meta: meta, events: make(chan event.GenericEvent, 1024),
		watches: map[trigger]chan struct{}{}, rotations: map[trigger]map[string]bool{}, of: map[string][]trigger{}}
}

// triggersOf are the triggers of the objects a census read.
func triggersOf(spec *v1alpha1.TrustRotationSpec, states []core.State) []trigger {
	seen := map[trigger]bool{}
	var out []trigger
	add := func(t trigger) {
		if t.name != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, s := range states {
		switch s.Kind {
		case core.KindConfigMap:
			add(trigger{"configmaps", s.Name})
		case core.KindSecret:
			add(trigger{"secrets", s.Name})
		case core.KindClusterTrustBundle:
			add(trigger{"clustertrustbundles", s.Name}) // by signer: the interval only
		}
	}
	for _, ca := range []v1alpha1.CA{spec.OldCA, spec.NewCA} {
		if f := ca.From; f != nil {
			res := "configmaps"
			if f.Kind == string(core.KindSecret) {
				res = "secrets"
			}
			add(trigger{res, f.Name})
		}
	}
	for _, t := range revocationTriggers(spec) {
		add(t)
	}
	return out
}

// follow makes rotation's triggers ts (nil: none, for a deleted rotation),
// starting the watches newly needed and stopping those no rotation needs.
func (t *triggers) follow(rotation string, ts []trigger) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, old := range t.of[rotation] {
		delete(t.rotations[old], rotation)
	}
	t.of[rotation] = ts
	if ts == nil {
		delete(t.of, rotation)
	}
	for _, k := range ts {
		if t.rotations[k] == nil {
			t.rotations[k] = map[string]bool{}
		}
		t.rotations[k][rotation] = true
		if _, ok := t.watches[k]; !ok {
			t.watches[k] = t.start(k)
		}
	}
	for k, stop := range t.watches {
		if len(t.rotations[k]) == 0 {
			close(stop)
			delete(t.watches, k)
			delete(t.rotations, k)
		}
	}
}

// start starts the watch of k.
func (t *triggers) start(k trigger) chan struct{} {
	stop := make(chan struct{})
	sel := fields.OneTermEqualSelector("metadata.name", k.name).String()
	inf := metadatainformer.NewFilteredMetadataInformer(t.meta, triggerGVR[k.resource], metav1.NamespaceAll, 0, toolscache.Indexers{},
		func(o *metav1.ListOptions) { o.FieldSelector = sel }).Informer()
	wake := func(any) { t.wake(k) }
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: wake, UpdateFunc: func(_, o any) { wake(o) }, DeleteFunc: wake,
	})
	go inf.Run(stop)
	return stop
}

// wake enqueues the rotations that read k (dropped when the queue is full:
// the periodic census covers it).
func (t *triggers) wake(k trigger) {
	t.mu.Lock()
	var names []string
	for r := range t.rotations[k] {
		names = append(names, r)
	}
	t.mu.Unlock()
	for _, r := range names {
		select {
		case t.events <- event.GenericEvent{Object: &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: r}}}:
		default:
		}
	}
}

// stopAll stops every watch.
func (t *triggers) stopAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, stop := range t.watches {
		close(stop)
		delete(t.watches, k)
	}
}
