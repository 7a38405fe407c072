package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies (what controller-gen would generate).

// DeepCopyInto copies s into out.
func (s *ReferenceRuleSpec) DeepCopyInto(out *ReferenceRuleSpec) {
	*out = *s
	out.SecretRefs = copyDataRefs(s.SecretRefs)
	out.ConfigMapRefs = copyDataRefs(s.ConfigMapRefs)
	if s.ReferencedBy != nil {
		out.ReferencedBy = append([]Referrer(nil), s.ReferencedBy...)
	}
	if s.Workloads != nil {
		w := *s.Workloads
		if w.Kinds != nil {
			w.Kinds = append([]string(nil), w.Kinds...)
		}
		if w.OwnerReferences != nil {
			w.OwnerReferences = &OwnerReferences{}
		}
		if w.Selector != nil {
			w.Selector = make(map[string]string, len(s.Workloads.Selector))
			for k, v := range s.Workloads.Selector {
				w.Selector[k] = v
			}
		}
		out.Workloads = &w
	}
	if s.Rollout != nil {
		r := *s.Rollout
		out.Rollout = &r
	}
	out.RolloutWindows = copyRolloutWindows(s.RolloutWindows)
}

func copyDataRefs(in []DataRef) []DataRef {
	if in == nil {
		return nil
	}
	out := make([]DataRef, len(in))
	for i, r := range in {
		out[i] = r
		if r.Key != nil {
			k := *r.Key
			out[i].Key = &k
		}
	}
	return out
}

// DeepCopyInto copies r into out.
func (r *ReferenceRule) DeepCopyInto(out *ReferenceRule) {
	*out = *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	r.Spec.DeepCopyInto(&out.Spec)
	if r.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(r.Status.Conditions))
		for i := range r.Status.Conditions {
			r.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a deep copy of r.
func (r *ReferenceRule) DeepCopy() *ReferenceRule {
	if r == nil {
		return nil
	}
	out := new(ReferenceRule)
	r.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (r *ReferenceRule) DeepCopyObject() runtime.Object { return r.DeepCopy() }

// DeepCopyInto copies l into out.
func (l *ReferenceRuleList) DeepCopyInto(out *ReferenceRuleList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]ReferenceRule, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *ReferenceRuleList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(ReferenceRuleList)
	l.DeepCopyInto(out)
	return out
}
