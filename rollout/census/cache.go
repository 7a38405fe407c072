package census

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// CacheOptions returns opts with what the census needs of the manager's
// cache: EndpointSlices, reduced as they enter the cache to what the census
// reads (see the package documentation), and TrustRotations. The census
// keeps no Pods in the manager's cache: its pod feed (podfeed.go) keeps
// records of them of its own, a fraction of a Pod's size.
func (c *Census) CacheOptions(opts cache.Options) cache.Options {
	by := make(map[client.Object]cache.ByObject, len(opts.ByObject)+2)
	for k, v := range opts.ByObject {
		by[k] = v
	}
	// Every slice, whatever default label selector opts has (the rollout
	// controller's workload selector is about workloads).
	by[&discoveryv1.EndpointSlice{}] = cache.ByObject{Transform: reduceEndpointSlice, Label: labels.Everything()}
	// The TrustRotations, whole, and their status writes' echoes.
	by[&v1alpha1.TrustRotation{}] = cache.ByObject{Label: labels.Everything()}
	opts.ByObject = by
	return opts
}

// reduceEndpointSlice keeps of an EndpointSlice its endpoints' addresses,
// readiness and target references, and its ports.
func reduceEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{
		TypeMeta:    s.TypeMeta,
		ObjectMeta:  metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion, Labels: s.Labels},
		AddressType: s.AddressType,
		Ports:       s.Ports,
	}
	for _, e := range s.Endpoints {
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, TargetRef: e.TargetRef})
	}
	return out, nil
}
