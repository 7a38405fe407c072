package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
)

// lastApplied is kubectl's client-side-apply annotation: on a Secret applied with
// kubectl it holds the whole Secret, data included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CacheOptions returns the manager cache configuration the controller needs,
// restricted to namespaces when any are given. What it keeps in memory:
//
//   - Secrets and ConfigMaps: nothing, unless Options.SecretCache is
//     cacheFull (whole objects, for comparison). In the other modes they are
//     watched by the controller's own reflector (see refWatcher), which keeps
//     only the objects an opted-in workload references, as digests.
//   - Deployments, StatefulSets, DaemonSets: without managed fields and the
//     last-applied annotation; for a workload that is neither opted in nor
//     managed (no state annotations: a workload a ReferenceRule reaches gets
//     them when adopted), only its metadata and, of its pod template, the
//     volumes it mounts with subPath, reduced to the items those mounts reach
//     (see subpath.go: the controller warns about them); the rest of its spec
//     and its status are dropped.
//   - Kinds ReferenceRules declare (targets.go): likewise, only the metadata
//     of an object that is neither opted in nor managed (targetTransform).
//
// Managed fields and kubectl's last-applied annotation (which holds the whole
// object, a Secret's data included, when it was applied with kubectl) are
// never kept.
//
// With Options.WorkloadSelector, the workload watches carry it as their label
// selector (the default one, so that it holds for the kinds ReferenceRules
// declare too; Secrets and ConfigMaps are exempt): the API server sends only
// matching workloads, and a workload that stops matching arrives as a
// deletion (see scopeReporter). With
// Options.NamespaceSelector, the namespaces are the scoped cache's business
// (see NewCache).
func (c *Controller) CacheOptions(namespaces ...string) cache.Options {
	c.namespaces = namespaces
	sel := c.opts.WorkloadSelector
	opts := cache.Options{
		DefaultTransform:     targetTransform,
		DefaultLabelSelector: sel,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:      {Transform: stripMetadata, Label: labels.Everything()},
			&corev1.ConfigMap{}:   {Transform: stripMetadata, Label: labels.Everything()},
			&appsv1.Deployment{}:  {Transform: workloadTransform, Label: sel},
			&appsv1.StatefulSet{}: {Transform: workloadTransform, Label: sel},
			&appsv1.DaemonSet{}:   {Transform: workloadTransform, Label: sel},
		},
	}
	if len(namespaces) > 0 && c.opts.NamespaceSelector == nil {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// NewCache builds the manager's cache from the options CacheOptions returned
// (it is a cache.NewCacheFunc: the manager's NewCache). Without a namespace
// selector it is controller-runtime's cache; with one, a cache that watches
// the namespaces in scope only (see nsScope and scopedCache).
func (c *Controller) NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	if c.opts.NamespaceSelector == nil {
		return cache.New(cfg, opts)
	}
	c.scope = newNSScope(c.opts.NamespaceSelector, c.namespaces, cfg)
	sc, err := newScopedCache(c.scope, cfg, opts, ctrl.Log.WithName("scope"))
	if err != nil {
		return nil, fmt.Errorf("controller: building the scoped cache: %w", err)
	}
	return sc, nil
}

// ClientOptions returns the manager client configuration: unless the mode is
// cacheFull, reads of Secrets and ConfigMaps go to the API server, so that no
// code path can start a whole-object informer for them by accident.
func (c *Controller) ClientOptions() client.Options {
	if c.opts.SecretCache == cacheFull {
		return client.Options{}
	}
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// isReferenced reports whether an opted-in workload of namespace ns references
// the object kind/name, through the workload caches' reference index (or
// Options.AlsoReferenced). Before the caches exist it reports false.
func (c *Controller) isReferenced(kind rollout.Kind, ns, name string) bool {
	if f := c.opts.AlsoReferenced; f != nil && f(kind, ns, name) {
		return true
	}
	if c.live != nil && c.live.Referenced(kind, ns, name) {
		return true
	}
	r := c.cacheReader.Load()
	if r == nil {
		return false
	}
	for _, k := range c.kinds() {
		list := k.newList()
		err := (*r).List(context.Background(), list, client.InNamespace(ns),
			client.MatchingFields{rollout.RefIndex: rollout.RefIndexValue(kind, name)}, client.UnsafeDisableDeepCopy)
		if err == nil && meta.LenList(list) > 0 {
			return true
		}
	}
	return false
}

func stripMetadata(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			if _, ok := a[lastApplied]; ok {
				delete(a, lastApplied)
				o.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}

func workloadTransform(obj any) (any, error) {
	if _, err := stripMetadata(obj); err != nil {
		return nil, err
	}
	o, ok := obj.(client.Object)
	if !ok || optedIn(o) || hasState(o) {
		return obj, nil
	}
	// Of the spec, only what subPath mounts reach (see subpath.go).
	switch w := o.(type) {
	case *appsv1.Deployment:
		w.Spec, w.Status = appsv1.DeploymentSpec{Template: subPathTemplate(&w.Spec.Template)}, appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		w.Spec, w.Status = appsv1.StatefulSetSpec{Template: subPathTemplate(&w.Spec.Template)}, appsv1.StatefulSetStatus{}
	case *appsv1.DaemonSet:
		w.Spec, w.Status = appsv1.DaemonSetSpec{Template: subPathTemplate(&w.Spec.Template)}, appsv1.DaemonSetStatus{}
	}
	return obj, nil
}
