package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies of TrustRotation (what controller-gen would
// generate).

// DeepCopyInto copies s into out.
func (s *TrustRotationSpec) DeepCopyInto(out *TrustRotationSpec) {
	*out = *s
	s.OldCA.DeepCopyInto(&out.OldCA)
	s.NewCA.DeepCopyInto(&out.NewCA)
	if s.Trust != nil {
		out.Trust = make([]TrustObject, len(s.Trust))
		for i := range s.Trust {
			s.Trust[i].DeepCopyInto(&out.Trust[i])
		}
	}
	out.ServerCertificates = slices.Clone(s.ServerCertificates)
	out.Evidence = Evidence{Prometheus: clonePtr(s.Evidence.Prometheus), Scrape: clonePtr(s.Evidence.Scrape)}
	out.Propagation = Propagation{Volume: clonePtr(s.Propagation.Volume), ClusterTrustBundle: clonePtr(s.Propagation.ClusterTrustBundle)}
	if s.Acknowledged != nil {
		out.Acknowledged = make([]Acknowledgement, len(s.Acknowledged))
		for i, a := range s.Acknowledged {
			out.Acknowledged[i] = a
			out.Acknowledged[i].Selector = a.Selector.DeepCopy()
		}
	}
	out.Drive = s.Drive.DeepCopy()
	out.Revocation = s.Revocation.DeepCopy()
}

// DeepCopyInto copies c into out.
func (c *CA) DeepCopyInto(out *CA) {
	*out = *c
	out.SHA256 = slices.Clone(c.SHA256)
	out.From = clonePtr(c.From)
}

// DeepCopyInto copies t into out.
func (t *TrustObject) DeepCopyInto(out *TrustObject) {
	*out = *t
	out.ConfigMap = clonePtr(t.ConfigMap)
	out.Secret = clonePtr(t.Secret)
	out.Bundle = clonePtr(t.Bundle)
	if t.ClusterTrustBundle != nil {
		r := *t.ClusterTrustBundle
		r.LabelSelector = t.ClusterTrustBundle.LabelSelector.DeepCopy()
		out.ClusterTrustBundle = &r
	}
}

// DeepCopyInto copies s into out.
func (s *TrustRotationStatus) DeepCopyInto(out *TrustRotationStatus) {
	*out = *s
	if s.Trust != nil {
		out.Trust = make([]TrustObjectStatus, len(s.Trust))
		for i, t := range s.Trust {
			out.Trust[i] = t
			out.Trust[i].NewSince = t.NewSince.DeepCopy()
			out.Trust[i].OldGoneSince = t.OldGoneSince.DeepCopy()
		}
	}
	if s.ServerCertificates != nil {
		out.ServerCertificates = make([]ServerCertificateStatus, len(s.ServerCertificates))
		for i, c := range s.ServerCertificates {
			out.ServerCertificates[i] = c
			out.ServerCertificates[i].NewSince = c.NewSince.DeepCopy()
		}
	}
	out.Stragglers = slices.Clone(s.Stragglers)
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	out.Drive = s.Drive.DeepCopy()
	out.Revocation = s.Revocation.DeepCopy()
}

// DeepCopyInto copies r into out.
func (r *TrustRotation) DeepCopyInto(out *TrustRotation) {
	*out = *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	r.Spec.DeepCopyInto(&out.Spec)
	r.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of r.
func (r *TrustRotation) DeepCopy() *TrustRotation {
	if r == nil {
		return nil
	}
	out := new(TrustRotation)
	r.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (r *TrustRotation) DeepCopyObject() runtime.Object { return r.DeepCopy() }

// DeepCopyInto copies l into out.
func (l *TrustRotationList) DeepCopyInto(out *TrustRotationList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]TrustRotation, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *TrustRotationList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(TrustRotationList)
	l.DeepCopyInto(out)
	return out
}

// clonePtr returns a copy of *p (nil for nil): for structs without
// pointers, maps or slices.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopy returns a deep copy of s.
func (s *TrustRotationStatus) DeepCopy() *TrustRotationStatus {
	if s == nil {
		return nil
	}
	out := new(TrustRotationStatus)
	s.DeepCopyInto(out)
	return out
}
