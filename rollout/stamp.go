package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Stamp writes hash into the pod-template annotation [AnnotationConfigHash] and
// reports whether it changed. Changing a pod template rolls the workload: call it
// only to roll.
func Stamp(tmpl *corev1.PodTemplateSpec, hash string) bool {
	if tmpl.Annotations[AnnotationConfigHash] == hash {
		return false
	}
	if tmpl.Annotations == nil {
		tmpl.Annotations = map[string]string{}
	}
	tmpl.Annotations[AnnotationConfigHash] = hash
	return true
}

// Stamped returns the hash stamped on tmpl, or "".
func Stamped(tmpl *corev1.PodTemplateSpec) string { return tmpl.Annotations[AnnotationConfigHash] }

// PodTemplate returns the pod template of a Deployment, StatefulSet or DaemonSet,
// or nil for any other object.
func PodTemplate(obj client.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *appsv1.DaemonSet:
		return &o.Spec.Template
	}
	return nil
}
