package v1alpha2

import "k8s.io/apimachinery/pkg/runtime"

// Hand-written deep copies (what controller-gen would generate).

// DeepCopyInto copies s into out.
func (s *ModelConfigSpec) DeepCopyInto(out *ModelConfigSpec) {
	*out = *s
	if s.TLS != nil {
		t := *s.TLS
		out.TLS = &t
	}
}

// DeepCopyInto copies m into out.
func (m *ModelConfig) DeepCopyInto(out *ModelConfig) {
	*out = *m
	out.TypeMeta = m.TypeMeta
	m.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	m.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy of m.
func (m *ModelConfig) DeepCopy() *ModelConfig {
	if m == nil {
		return nil
	}
	out := new(ModelConfig)
	m.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (m *ModelConfig) DeepCopyObject() runtime.Object { return m.DeepCopy() }

// DeepCopyInto copies l into out.
func (l *ModelConfigList) DeepCopyInto(out *ModelConfigList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]ModelConfig, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *ModelConfigList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(ModelConfigList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out.
func (s *AgentSpec) DeepCopyInto(out *AgentSpec) {
	*out = *s
	if s.Declarative != nil {
		d := *s.Declarative
		out.Declarative = &d
	}
}

// DeepCopyInto copies a into out.
func (a *Agent) DeepCopyInto(out *Agent) {
	*out = *a
	out.TypeMeta = a.TypeMeta
	a.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	a.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a deep copy of a.
func (a *Agent) DeepCopy() *Agent {
	if a == nil {
		return nil
	}
	out := new(Agent)
	a.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (a *Agent) DeepCopyObject() runtime.Object { return a.DeepCopy() }

// DeepCopyInto copies l into out.
func (l *AgentList) DeepCopyInto(out *AgentList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Agent, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (l *AgentList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := new(AgentList)
	l.DeepCopyInto(out)
	return out
}
