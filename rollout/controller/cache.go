package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
)

// CacheOptions returns the manager cache configuration the controller needs,
// restricted to Options.Namespaces when any are given. It is pure: call it,
// NewCache and ClientOptions in any order, as often as needed. What the cache
// keeps in memory:
//
//   - Secrets and ConfigMaps: nothing. They are watched by the controller's
//     own reflector (see clusterview.Watcher), which keeps only the objects
//     an opted-in workload references, as digests.
//   - Deployments, StatefulSets, DaemonSets: without managed fields and the
//     last-applied annotation; for a workload that is neither opted in nor
//     managed (no state annotations: a workload a ReferenceRule reaches gets
//     them when adopted), only its metadata and, of its pod template, the
//     volumes it mounts with subPath, reduced to the items those mounts reach
//     (see subpath.go: the controller warns about them); the rest of its spec
//     and its status are dropped.
//   - Kinds ReferenceRules declare (targets.go): likewise, only the metadata
//     of an object that is neither opted in nor managed.
//
// Managed fields and kubectl's last-applied annotation (which holds the whole
// object, a Secret's data included, when it was applied with kubectl) are
// never kept.
//
// With Options.WorkloadSelector, the workload watches carry it as their label
// selector (the default one, so that it holds for the kinds ReferenceRules
// declare too; Secrets and ConfigMaps are exempt): the API server sends only
// matching workloads, and a workload that stops matching arrives as a
// deletion (see scopeReporter). With Options.NamespaceSelector, the
// namespaces are the scoped cache's business (see NewCache).
func (c *Controller) CacheOptions() cache.Options { return c.view.CacheOptions() }

// NewCache builds the manager's cache from the options CacheOptions returned
// (it is a cache.NewCacheFunc: the manager's NewCache). Without a namespace
// selector it is controller-runtime's cache; with one, a cache that watches
// the namespaces in scope only, as they enter and leave it.
func (c *Controller) NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	return c.view.NewCache(cfg, opts)
}

// ClientOptions returns the manager client configuration: reads of Secrets
// and ConfigMaps go to the API server, so that no code path can start a
// whole-object informer for them by accident.
func (c *Controller) ClientOptions() client.Options { return c.view.ClientOptions() }

// isReferenced reports whether an opted-in workload of namespace ns references
// the object kind/name, through the workload caches' reference index (or
// Options.AlsoReferenced, or a ReferenceRule's chain), or a workload that is
// not managed mounts it with subPath: the cluster view keeps the digests of
// those objects. Before the caches exist it reports false.
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
	// What a workload that is not managed mounts with subPath, so that a
	// change of it can be warned about (see subpath.go).
	return subPathReferenced(*r, kind, ns, name)
}
