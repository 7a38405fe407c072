package rollout

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// RefIndex is the name of the field index from a referenced object to the objects
// that reference it; its values are [RefIndexValue]s.
const RefIndex = "hotcert.dev/refs"

// RefIndexValue is the index value for the object kind/name (in the referencing
// object's namespace).
func RefIndexValue(kind Kind, name string) string { return string(kind) + "/" + name }

// RefIndexer returns a client.IndexerFunc for [RefIndex] (pass it to
// mgr.GetFieldIndexer().IndexField) that indexes each object under the objects
// refsOf says it references. refsOf may return nil for an object that is not
// opted in, keeping it out of the index.
func RefIndexer(refsOf func(client.Object) Refs) client.IndexerFunc {
	return func(obj client.Object) []string {
		refs := refsOf(obj)
		out := make([]string, 0, len(refs))
		for _, r := range refs {
			out = append(out, RefIndexValue(r.Kind, r.Name))
		}
		return out
	}
}

// MapReferrers returns a handler.MapFunc that maps an event on a Secret or
// ConfigMap of kind (a full object or its metadata) to a request for each object
// of the list type newList returns that references it, found through the
// [RefIndex] field index of c (a cache-backed reader). It does no API call and
// never lists the whole cluster.
func MapReferrers(c client.Reader, kind Kind, newList func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace()),
			client.MatchingFields{RefIndex: RefIndexValue(kind, obj.GetName())}); err != nil {
			// A cache-backed List fails only when the index is missing.
			log.FromContext(ctx).Error(err, "rollout: listing referrers", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if m, err := meta.Accessor(o); err == nil {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
			}
			return nil
		})
		return reqs
	}
}
