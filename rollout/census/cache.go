package census

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// CacheOptions returns opts with what the census needs of the manager's
// cache: Pods and EndpointSlices, each reduced as it enters the cache to what
// the census reads (see the package documentation). Any other reader of the
// manager's cache then sees those reduced objects.
func (c *Census) CacheOptions(opts cache.Options) cache.Options {
	by := make(map[client.Object]cache.ByObject, len(opts.ByObject)+2)
	for k, v := range opts.ByObject {
		by[k] = v
	}
	// Every pod and slice, whatever default label selector opts has (the
	// rollout controller's workload selector is about workloads).
	by[&corev1.Pod{}] = cache.ByObject{Transform: reducePod, Label: labels.Everything()}
	by[&discoveryv1.EndpointSlice{}] = cache.ByObject{Transform: reduceEndpointSlice, Label: labels.Everything()}
	// The TrustRotations, whole, and their status writes' echoes.
	by[&v1alpha1.TrustRotation{}] = cache.ByObject{Label: labels.Everything()}
	opts.ByObject = by
	return opts
}

// reducePod keeps of a pod what the census reads. Env values are dropped
// (only references to Secrets and ConfigMaps are kept): they may be secret.
func reducePod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: p.Labels, DeletionTimestamp: p.DeletionTimestamp},
		Status: corev1.PodStatus{Phase: p.Status.Phase, PodIP: p.Status.PodIP},
	}
	for _, v := range p.Spec.Volumes {
		if v.Secret != nil || v.ConfigMap != nil || v.Projected != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Secret: v.Secret, ConfigMap: v.ConfigMap, Projected: v.Projected}})
		}
	}
	for _, c := range p.Spec.Containers {
		k := corev1.Container{Name: c.Name, Ports: c.Ports, VolumeMounts: c.VolumeMounts, EnvFrom: c.EnvFrom}
		for _, e := range c.Env {
			if f := e.ValueFrom; f != nil && (f.SecretKeyRef != nil || f.ConfigMapKeyRef != nil) {
				k.Env = append(k.Env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: f.SecretKeyRef, ConfigMapKeyRef: f.ConfigMapKeyRef}})
			}
		}
		out.Spec.Containers = append(out.Spec.Containers, k)
	}
	for _, s := range p.Status.ContainerStatuses {
		k := corev1.ContainerStatus{Name: s.Name}
		if r := s.State.Running; r != nil {
			k.State.Running = &corev1.ContainerStateRunning{StartedAt: r.StartedAt}
		}
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, k)
	}
	return out, nil
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
