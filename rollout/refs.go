package rollout

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Kind is the kind of a referenced object.
type Kind string

// The kinds of objects a pod spec consumes data from.
const (
	KindSecret    Kind = "Secret"
	KindConfigMap Kind = "ConfigMap"
)

// Ref is one Secret or ConfigMap a workload consumes, in the workload's namespace,
// with every use of it merged.
type Ref struct {
	Kind Kind
	// Name is the object's name or, for an object of another namespace (a
	// custom resource chain can lead there), "namespace:name"; Lookup,
	// Config.Entries and Change name it the same way.
	Name string
	// All is true when some use consumes every key (a volume without items, an
	// envFrom): keys added to or removed from the object then matter too.
	All bool
	// Keys are the keys named explicitly (volume or projection items, env
	// valueFrom), sorted, each with whether it may be absent.
	Keys []KeyRef
	// Optional is true when every use tolerates the object's absence.
	Optional bool
	// Uses says where the object is consumed ("volume tls", "env CA in container
	// app", ...), for messages.
	Uses []string
}

// KeyRef is one key named explicitly by a reference.
type KeyRef struct {
	Key string
	// Optional is true when every use tolerates the key's absence.
	Optional bool
}

// Refs is the set of objects a pod spec consumes, sorted by kind then name, one
// entry per object.
type Refs []Ref

// Find returns the reference to the object kind/name, if any.
func (rs Refs) Find(kind Kind, name string) (Ref, bool) {
	i, ok := slices.BinarySearchFunc(rs, Ref{Kind: kind, Name: name}, compareRef)
	if !ok {
		return Ref{}, false
	}
	return rs[i], true
}

func compareRef(a, b Ref) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}

// PodSpecRefs returns the Secrets and ConfigMaps spec consumes: secret and
// configMap volumes and projected sources (with or without items), and
// env.valueFrom and envFrom of init containers and containers. imagePullSecrets
// are not consumed by the workload's code, and service-account tokens, downward
// API and cluster trust bundles are not Secrets or ConfigMaps: none of them is
// returned.
func PodSpecRefs(spec *corev1.PodSpec) Refs {
	b := newRefBuilder()
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		use := "volume " + v.Name
		switch {
		case v.Secret != nil:
			b.addItems(KindSecret, v.Secret.SecretName, v.Secret.Items, deref(v.Secret.Optional), use)
		case v.ConfigMap != nil:
			b.addItems(KindConfigMap, v.ConfigMap.Name, v.ConfigMap.Items, deref(v.ConfigMap.Optional), use)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if s := src.Secret; s != nil {
					b.addItems(KindSecret, s.Name, s.Items, deref(s.Optional), use)
				}
				if c := src.ConfigMap; c != nil {
					b.addItems(KindConfigMap, c.Name, c.Items, deref(c.Optional), use)
				}
			}
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			c := &cs[i]
			for _, e := range c.EnvFrom {
				use := "envFrom in container " + c.Name
				if e.SecretRef != nil {
					b.add(KindSecret, e.SecretRef.Name, true, nil, deref(e.SecretRef.Optional), use)
				}
				if e.ConfigMapRef != nil {
					b.add(KindConfigMap, e.ConfigMapRef.Name, true, nil, deref(e.ConfigMapRef.Optional), use)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				use := fmt.Sprintf("env %s in container %s", e.Name, c.Name)
				if s := e.ValueFrom.SecretKeyRef; s != nil {
					opt := deref(s.Optional)
					b.add(KindSecret, s.Name, false, []KeyRef{{Key: s.Key, Optional: opt}}, opt, use)
				}
				if s := e.ValueFrom.ConfigMapKeyRef; s != nil {
					opt := deref(s.Optional)
					b.add(KindConfigMap, s.Name, false, []KeyRef{{Key: s.Key, Optional: opt}}, opt, use)
				}
			}
		}
	}
	return b.refs()
}

// Merge returns rs and other, two sets of references of one namespace (a
// workload's pod spec and the custom-resource chains that reach it), as one:
// one Ref per object, every key of both, All if either consumes all, optional
// only if optional in both.
func (rs Refs) Merge(other Refs) Refs {
	b := newRefBuilder()
	for _, r := range slices.Concat(rs, other) {
		b.add(r.Kind, r.Name, r.All, r.Keys, r.Optional, r.Uses...)
	}
	return b.refs()
}

// refBuilder merges the uses of each object.
type refBuilder struct {
	byObj map[objectKey]*refAcc
}

// objectKey names a referenced object within a namespace.
type objectKey struct {
	kind Kind
	name string
}

type refAcc struct {
	ref  Ref
	keys map[string]bool // key -> optional
}

func newRefBuilder() *refBuilder { return &refBuilder{byObj: map[objectKey]*refAcc{}} }

func (b *refBuilder) addItems(kind Kind, name string, items []corev1.KeyToPath, optional bool, use string) {
	if len(items) == 0 {
		b.add(kind, name, true, nil, optional, use)
		return
	}
	keys := make([]KeyRef, len(items))
	for i, it := range items {
		// The kubelet tolerates a missing item key exactly when the volume
		// source is optional.
		keys[i] = KeyRef{Key: it.Key, Optional: optional}
	}
	b.add(kind, name, false, keys, optional, use)
}

// add records one use (or, from Merge, every use of a Ref). An object is
// optional only when every use is; a key is optional only when every use
// naming it is.
func (b *refBuilder) add(kind Kind, name string, all bool, keys []KeyRef, optional bool, uses ...string) {
	if name == "" {
		return
	}
	id := objectKey{kind: kind, name: name}
	acc, ok := b.byObj[id]
	if !ok {
		acc = &refAcc{ref: Ref{Kind: kind, Name: name, Optional: true}, keys: map[string]bool{}}
		b.byObj[id] = acc
	}
	acc.ref.All = acc.ref.All || all
	acc.ref.Optional = acc.ref.Optional && optional
	for _, k := range keys {
		prev, seen := acc.keys[k.Key]
		acc.keys[k.Key] = k.Optional && (!seen || prev)
	}
	for _, use := range uses {
		if !slices.Contains(acc.ref.Uses, use) {
			acc.ref.Uses = append(acc.ref.Uses, use)
		}
	}
}

func (b *refBuilder) refs() Refs {
	out := make(Refs, 0, len(b.byObj))
	for _, acc := range b.byObj {
		r := acc.ref
		for k, opt := range acc.keys {
			r.Keys = append(r.Keys, KeyRef{Key: k, Optional: opt})
		}
		slices.SortFunc(r.Keys, func(a, b KeyRef) int { return cmp.Compare(a.Key, b.Key) })
		out = append(out, r)
	}
	slices.SortFunc(out, compareRef)
	return out
}

func deref(b *bool) bool { return b != nil && *b }
