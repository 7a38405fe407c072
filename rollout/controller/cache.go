package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lastApplied is kubectl's client-side-apply annotation: on a Secret applied with
// kubectl it holds the whole Secret, data included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// CacheOptions returns the manager cache configuration the controller needs,
// restricted to namespaces when any are given. What it keeps in memory:
//
//   - Secrets and ConfigMaps: metadata only, watched as PartialObjectMetadata,
//     and cut down further to name, namespace, uid and resourceVersion (no
//     labels, annotations or managed fields). The API server never sends their
//     data to the controller's watch; see store for how referenced data is read.
//   - Deployments, StatefulSets, DaemonSets: without managed fields and the
//     last-applied annotation; for a workload that is not opted in, only its
//     metadata (its spec and status are dropped), since the controller does not
//     look at them.
//
// With o.CacheSecretData, whole Secrets and ConfigMaps are cached instead.
func CacheOptions(o Options, namespaces ...string) cache.Options {
	refTransform := toolscache.TransformFunc(metadataOnly)
	if o.CacheSecretData {
		refTransform = stripMetadata
	}
	opts := cache.Options{
		DefaultTransform: stripMetadata,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:      {Transform: refTransform},
			&corev1.ConfigMap{}:   {Transform: refTransform},
			&appsv1.Deployment{}:  {Transform: workloadTransform},
			&appsv1.StatefulSet{}: {Transform: workloadTransform},
			&appsv1.DaemonSet{}:   {Transform: workloadTransform},
		},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// ClientOptions returns the manager client configuration: unless o caches whole
// Secrets and ConfigMaps, reads of them go to the API server, so that no code
// path can start a full-object informer for them by accident.
func ClientOptions(o Options) client.Options {
	if o.CacheSecretData {
		return client.Options{}
	}
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
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

// metadataOnly keeps what identifies a version of an object, nothing else.
func metadataOnly(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return stripMetadata(obj)
	}
	return &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
			DeletionTimestamp: m.DeletionTimestamp,
		},
	}, nil
}

func workloadTransform(obj any) (any, error) {
	if _, err := stripMetadata(obj); err != nil {
		return nil, err
	}
	o, ok := obj.(client.Object)
	if !ok || optedIn(o) {
		return obj, nil
	}
	switch w := o.(type) {
	case *appsv1.Deployment:
		w.Spec, w.Status = appsv1.DeploymentSpec{}, appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		w.Spec, w.Status = appsv1.StatefulSetSpec{}, appsv1.StatefulSetStatus{}
	case *appsv1.DaemonSet:
		w.Spec, w.Status = appsv1.DaemonSetSpec{}, appsv1.DaemonSetStatus{}
	}
	return obj, nil
}
