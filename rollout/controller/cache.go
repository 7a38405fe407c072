package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
)

// lastApplied is kubectl's client-side-apply annotation: on a Secret applied with
// kubectl it holds the whole Secret, data included.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// dataDropped marks, in the cache only, a Secret or ConfigMap whose data the
// transform dropped because no opted-in workload referenced it then.
const dataDropped = "hotcert.dev/internal-data-dropped"

// CacheOptions returns the manager cache configuration the controller needs,
// restricted to namespaces when any are given. What it keeps in memory:
//
//   - Secrets and ConfigMaps, as Options.SecretCache says: by default
//     (CacheReferenced) the data of the objects an opted-in workload
//     references, and of every other object only its name, namespace, uid and
//     resourceVersion (a transform drops the rest before it is stored); with
//     CacheMetadata, metadata only, cut down the same way; with CacheFull,
//     everything (for comparison).
//   - Deployments, StatefulSets, DaemonSets: without managed fields and the
//     last-applied annotation; for a workload that is not opted in, only its
//     metadata (its spec and status are dropped), since the controller does not
//     look at them.
//
// Managed fields and kubectl's last-applied annotation (which holds the whole
// Secret, data included, when it was applied with kubectl) are never kept.
func (c *Controller) CacheOptions(namespaces ...string) cache.Options {
	var refTransform toolscache.TransformFunc
	switch c.opts.SecretCache {
	case CacheMetadata:
		refTransform = metadataOnly
	case CacheFull:
		refTransform = stripMetadata
	default:
		refTransform = c.dropUnreferenced
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

// ClientOptions returns the manager client configuration: with CacheMetadata,
// reads of Secrets and ConfigMaps go to the API server, so that no code path can
// start a whole-object informer for them by accident.
func (c *Controller) ClientOptions() client.Options {
	if c.opts.SecretCache != CacheMetadata {
		return client.Options{}
	}
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// isReferenced reports whether an opted-in workload of namespace ns references
// the object kind/name, through the workload caches' reference index. Before
// the caches exist it reports false (the data is then read when needed).
func (c *Controller) isReferenced(kind rollout.Kind, ns, name string) bool {
	if f := c.opts.AlsoReferenced; f != nil && f(kind, ns, name) {
		return true
	}
	r := c.cacheReader.Load()
	if r == nil {
		return false
	}
	for _, k := range workloadKinds {
		list := k.newList()
		err := (*r).List(context.Background(), list, client.InNamespace(ns),
			client.MatchingFields{rollout.RefIndex: rollout.RefIndexValue(kind, name)}, client.UnsafeDisableDeepCopy)
		if err == nil && meta.LenList(list) > 0 {
			return true
		}
	}
	return false
}

// dropUnreferenced is the CacheReferenced transform.
func (c *Controller) dropUnreferenced(obj any) (any, error) {
	if _, err := stripMetadata(obj); err != nil {
		return nil, err
	}
	var kind rollout.Kind
	var m *metav1.ObjectMeta
	switch o := obj.(type) {
	case *corev1.Secret:
		kind, m = rollout.KindSecret, &o.ObjectMeta
	case *corev1.ConfigMap:
		kind, m = rollout.KindConfigMap, &o.ObjectMeta
	default:
		return obj, nil
	}
	*m = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}
	if c.isReferenced(kind, m.Namespace, m.Name) {
		return obj, nil
	}
	m.Annotations = map[string]string{dataDropped: "true"}
	switch o := obj.(type) {
	case *corev1.Secret:
		o.Data, o.StringData = nil, nil
	case *corev1.ConfigMap:
		o.Data, o.BinaryData = nil, nil
	}
	return obj, nil
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
