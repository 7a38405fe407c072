package controller

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/hotcert/hotcert/rollout/internal/progress"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
)

// targets are the workload kinds ReferenceRules declare (spec.rollout). Each
// gets, the first time a rule in use declares it, a controller like those of
// the built-in kinds; controller-runtime cannot remove a controller, so a kind
// whose rule goes away keeps its (idle) controller and watch until the
// process restarts, and its objects are left alone.
type targets struct {
	mu    sync.Mutex
	kinds map[string]*declaredKind // by kind name
}

// declaredKind is one declared workload kind and the rule's current
// declaration of it.
type declaredKind struct {
	gvk    schema.GroupVersionKind
	kind   workloadKind
	target atomic.Pointer[referencerules.Target] // nil: no rule in use declares it
}

// kinds returns the workload kinds rolled now: the built-in ones and those
// the rules in use declare.
func (c *Controller) kinds() []workloadKind {
	out := slices.Clone(workloadKinds)
	c.targets.mu.Lock()
	defer c.targets.mu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(c.targets.kinds)) {
		if d := c.targets.kinds[name]; d.target.Load() != nil {
			out = append(out, d.kind)
		}
	}
	return out
}

// followTargets adds a controller for each kind a rule in use declares, the
// first time one does, and keeps each declared kind's declaration current.
// A declared kind is cached by the manager's cache, as unstructured objects,
// so the cache's namespaces, selectors and transforms apply to it as to the
// built-in kinds; Live has synced an informer of the kind before it reports
// it, so the controller may list and watch it.
func (c *Controller) followTargets(mgr manager.Manager) {
	logger := mgr.GetLogger().WithName("targets")
	c.live.OnTargets(func(ts []*referencerules.Target) {
		c.targets.mu.Lock()
		defer c.targets.mu.Unlock()
		if c.targets.kinds == nil {
			c.targets.kinds = map[string]*declaredKind{}
		}
		seen := map[string]bool{}
		for _, t := range ts {
			name := t.GVK.Kind
			seen[name] = true
			if d := c.targets.kinds[name]; d != nil {
				if d.gvk.GroupKind() != t.GVK.GroupKind() {
					logger.Error(nil, "a workload kind of this name is rolled already, as another group's kind, until the controller restarts", "kind", name, "rolled", d.gvk.GroupKind().String(), "rule", t.Rule, "declares", t.GVK.GroupKind().String())
					continue
				}
				d.target.Store(t)
				continue
			}
			d := &declaredKind{gvk: t.GVK}
			d.target.Store(t)
			d.kind = d.workloadKind()
			// Reads of unstructured objects go to the API server unless the
			// client is told to use the cache.
			cl, err := client.New(mgr.GetConfig(), client.Options{
				Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
				Cache: &client.CacheOptions{Reader: mgr.GetCache(), Unstructured: true},
			})
			if err == nil {
				_, err = c.setupKind(mgr, d.kind, cl)
			}
			if err != nil {
				logger.Error(err, "cannot roll a declared workload kind", "kind", t.GVK.String(), "rule", t.Rule)
				continue
			}
			c.targets.kinds[name] = d
			logger.Info("rolling a declared workload kind", "kind", t.GVK.String(), "rule", t.Rule)
		}
		for name, d := range c.targets.kinds {
			if !seen[name] {
				d.target.Store(nil)
			}
		}
	})
}

// workloadKind is d as the reconciler sees it: unstructured objects whose
// pod template, roll and readiness the rule's current declaration gives.
func (d *declaredKind) workloadKind() workloadKind {
	gvk, list := d.gvk, d.gvk.GroupVersion().WithKind(d.gvk.Kind+"List")
	current := func(obj client.Object) (*referencerules.Target, map[string]any) {
		u, _ := obj.(*unstructured.Unstructured)
		t := d.target.Load()
		if u == nil || t == nil {
			return nil, nil
		}
		return t, u.Object
	}
	return workloadKind{
		name: gvk.Kind,
		newObj: func() client.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u
		},
		newList: func() client.ObjectList {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(list)
			return l
		},
		template: func(obj client.Object) (*corev1.PodTemplateSpec, error) {
			t, o := current(obj)
			if t == nil {
				return nil, errNotDeclared
			}
			return t.PodTemplate(o)
		},
		roll: func(obj client.Object, hash string, now time.Time) error {
			t, o := current(obj)
			if t == nil {
				return errNotDeclared
			}
			return t.Roll(o, hash, now)
		},
		held: func(obj client.Object, hash string, now time.Time, writeErr error) error {
			t, o := current(obj)
			switch {
			case t == nil:
				return writeErr
			case writeErr != nil:
				if (apierrors.IsInvalid(writeErr) || apierrors.IsBadRequest(writeErr)) && strings.Contains(writeErr.Error(), "unknown field") {
					// Refused by strict field validation: nothing was written.
					return &referencerules.NotKeptError{Kind: t.GVK.Kind, Path: t.RollPath(), Rule: t.Rule, Err: writeErr}
				}
				return writeErr
			}
			return t.Held(o, hash, now)
		},
		progress: func(obj client.Object) progress.Progress {
			t, o := current(obj)
			if t == nil {
				return progress.Progress{Done: true}
			}
			return t.Progress(o)
		},
		declared: func() bool { return d.target.Load() != nil },
		stripped: func(obj client.Object) bool {
			u, _ := obj.(*unstructured.Unstructured)
			return u != nil && u.Object["spec"] == nil
		},
	}
}

// errNotDeclared: the rule that declared the kind is no longer in use.
var errNotDeclared = errNoRule{}

type errNoRule struct{}

func (errNoRule) Error() string { return "no ReferenceRule in use declares this kind any more" }
