package clusterview

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
)

// Config is what a View watches and keeps.
type Config struct {
	// Mode is what is kept of Secrets and ConfigMaps.
	Mode Mode
	// Namespaces are the namespaces watched (empty: all).
	Namespaces []string
	// NamespaceSelector, if set, narrows them to the namespaces whose labels
	// match, as they change (see nsScope).
	NamespaceSelector labels.Selector
	// WorkloadSelector, if set, is the label selector of the workload watches.
	WorkloadSelector labels.Selector
	// Managed reports whether a workload (or an object of a kind a
	// ReferenceRule declares) is managed: the cache keeps the others reduced
	// (see CacheOptions).
	Managed func(obj client.Object) bool
	// IsReferenced reports whether a workload references a Secret or
	// ConfigMap: the Store keeps the digests of those only. It must be fast
	// and safe for concurrent use.
	IsReferenced func(kind rollout.Kind, namespace, name string) bool
	// Reads counts each read of a Secret or ConfigMap from the API server.
	Reads func(kind rollout.Kind)
	// Clock judges the validity of TLS content as it is digested.
	Clock clock.PassiveClock
}

// View is the controller's view of the cluster: built once, with the
// controller; the manager is built with its CacheOptions, NewCache and
// ClientOptions, and its Store and Watcher are wired in SetupWithManager.
type View struct {
	cfg   Config
	store *Store
	scope *nsScope // nil without a namespace selector
}

// New returns the view cfg describes.
func New(cfg Config) *View {
	v := &View{cfg: cfg}
	v.store = &Store{mode: cfg.Mode, clock: cfg.Clock, entries: map[Key]*entry{},
		isReferenced: cfg.IsReferenced, reads: cfg.Reads}
	if cfg.NamespaceSelector != nil {
		v.scope = newScope(cfg.NamespaceSelector, cfg.Namespaces)
	}
	return v
}

// Store is the view's store of digests.
func (v *View) Store() *Store { return v.store }

// NewCache builds the manager's cache from opts (it is a cache.NewCacheFunc:
// the manager's NewCache). Without a namespace selector it is
// controller-runtime's cache; with one, a cache that watches the namespaces
// in scope only (see nsScope and scopedCache).
func (v *View) NewCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	if v.scope == nil {
		return cache.New(cfg, opts)
	}
	sc, err := newScopedCache(v.scope, cfg, opts, ctrl.Log.WithName("scope"))
	if err != nil {
		return nil, fmt.Errorf("clusterview: building the scoped cache: %w", err)
	}
	return sc, nil
}

// Follows reports whether c, the manager's cache, follows the view's
// namespace selector (it was built by NewCache); without a selector, any
// cache does.
func (v *View) Follows(c cache.Cache) bool {
	if v.scope == nil {
		return true
	}
	sc, ok := c.(*scopedCache)
	return ok && sc.scope == v.scope
}

// OutOfScope reports whether namespace ns is outside the namespace selector's
// scope now (false without a selector).
func (v *View) OutOfScope(ns string) bool {
	return v.scope != nil && !v.scope.contains(ns)
}
