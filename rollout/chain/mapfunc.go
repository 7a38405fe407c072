package chain

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout"
)

// Hop is one kind of object in a chain of references, indexed (field index
// [rollout.RefIndex], see [rollout.RefIndexer]) by the objects of the previous
// hop it references.
type Hop struct {
	// Kind is how the next hop's index names objects of this hop
	// ([rollout.RefIndexValue](Kind, name)), e.g. "ModelConfig".
	Kind rollout.Kind
	// NewList returns an empty list of this hop's objects.
	NewList func() client.ObjectList
}

// MapThrough returns a handler.MapFunc for controller-runtime's
// handler.EnqueueRequestsFromMapFunc that maps an event on a Secret or ConfigMap
// of kind through a chain of references: to the objects of hops[0] that
// reference it, then to the objects of hops[1] that reference those, and so on;
// it returns a request for each object of the last hop reached. With a single
// hop it is [rollout.MapReferrers].
//
// Every step is a List of c (a cache-backed reader) by the RefIndex field index,
// in the event's namespace: no API call, no listing of every object. Each object
// is visited once, so a cycle of references ends.
func MapThrough(c client.Reader, kind rollout.Kind, hops ...Hop) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		ns := obj.GetNamespace()
		names := []string{obj.GetName()}
		prev := kind
		var reqs []reconcile.Request
		for i, hop := range hops {
			seen := map[string]bool{}
			var next []string
			for _, name := range names {
				list := hop.NewList()
				if err := c.List(ctx, list, client.InNamespace(ns),
					client.MatchingFields{rollout.RefIndex: rollout.RefIndexValue(prev, name)}); err != nil {
					// A cache-backed List fails only when the index is missing.
					log.FromContext(ctx).Error(err, "chain: listing referrers", "kind", prev, "namespace", ns, "name", name, "referrer", hop.Kind)
					continue
				}
				_ = meta.EachListItem(list, func(o runtime.Object) error {
					m, err := meta.Accessor(o)
					if err != nil || seen[m.GetName()] {
						return nil
					}
					seen[m.GetName()] = true
					next = append(next, m.GetName())
					return nil
				})
			}
			if i == len(hops)-1 {
				for _, n := range next {
					reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: n}})
				}
			}
			names, prev = next, hop.Kind
		}
		return reqs
	}
}
