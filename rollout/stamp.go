package rollout

import corev1 "k8s.io/api/core/v1"

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
