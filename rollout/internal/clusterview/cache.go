package clusterview

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions returns the manager cache configuration of the view (see
// controller.Controller.CacheOptions for what it keeps): the transforms, the
// workload selector, and the namespaces unless a namespace selector makes
// them the scoped cache's business.
func (v *View) CacheOptions() cache.Options {
	sel := v.cfg.WorkloadSelector
	opts := cache.Options{
		DefaultTransform:     v.targetTransform,
		DefaultLabelSelector: sel,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}:      {Transform: stripMetadata, Label: labels.Everything()},
			&corev1.ConfigMap{}:   {Transform: stripMetadata, Label: labels.Everything()},
			&appsv1.Deployment{}:  {Transform: v.workloadTransform, Label: sel},
			&appsv1.StatefulSet{}: {Transform: v.workloadTransform, Label: sel},
			&appsv1.DaemonSet{}:   {Transform: v.workloadTransform, Label: sel},
		},
	}
	if len(v.cfg.Namespaces) > 0 && v.scope == nil {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range v.cfg.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// ClientOptions returns the manager client configuration: unless the mode is
// Full, reads of Secrets and ConfigMaps go to the API server, so that no
// code path can start a whole-object informer for them by accident.
func (v *View) ClientOptions() client.Options {
	if v.cfg.Mode == Full {
		return client.Options{}
	}
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}}
}

// stripMetadata drops managed fields and kubectl's client-side-apply
// annotation (corev1.LastAppliedConfigAnnotation: on a Secret applied with
// kubectl it holds the whole Secret, data included).
func stripMetadata(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				o.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}

// workloadTransform keeps, of a Deployment, StatefulSet or DaemonSet that is
// not managed, only its metadata and what its subPath mounts consume (see
// SubPathTemplate).
func (v *View) workloadTransform(obj any) (any, error) {
	if _, err := stripMetadata(obj); err != nil {
		return nil, err
	}
	o, ok := obj.(client.Object)
	if !ok || v.cfg.Managed(o) {
		return obj, nil
	}
	// Of the spec, only what subPath mounts reach.
	switch w := o.(type) {
	case *appsv1.Deployment:
		w.Spec, w.Status = appsv1.DeploymentSpec{Template: SubPathTemplate(&w.Spec.Template)}, appsv1.DeploymentStatus{}
	case *appsv1.StatefulSet:
		w.Spec, w.Status = appsv1.StatefulSetSpec{Template: SubPathTemplate(&w.Spec.Template)}, appsv1.StatefulSetStatus{}
	case *appsv1.DaemonSet:
		w.Spec, w.Status = appsv1.DaemonSetSpec{Template: SubPathTemplate(&w.Spec.Template)}, appsv1.DaemonSetStatus{}
	}
	return obj, nil
}

// targetTransform is the cache's transform of every object it has no
// transform of its own for (stripMetadata), and of objects of kinds
// ReferenceRules declare: one that is not managed keeps only its metadata,
// as workloadTransform keeps of the built-in kinds, since no decision reads
// its spec or status until it is (a ReferenceRule's chain that reaches it
// reads it from the API server).
func (v *View) targetTransform(obj any) (any, error) {
	if _, err := stripMetadata(obj); err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || v.cfg.Managed(u) {
		return obj, nil
	}
	for k := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			delete(u.Object, k)
		}
	}
	return u, nil
}
