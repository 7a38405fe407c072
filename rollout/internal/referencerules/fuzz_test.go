package referencerules

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// FuzzParsePath: a path either parses into non-empty field names that spell
// it again, or is refused; it never panics.
func FuzzParsePath(f *testing.F) {
	for _, p := range []string{"", "spec", "spec.apiKeySecret", "spec.tools[].secretRef", "a[].b[].c", "spec..x", "[]", "spec.[]", "spec.x[", "ä.b"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		segs, err := parsePath(p)
		if err != nil {
			if !strings.Contains(err.Error(), "referencerules: path") {
				t.Fatalf("error %q does not name the path", err)
			}
			return
		}
		var parts []string
		for _, s := range segs {
			if s.field == "" {
				t.Fatalf("%q: an empty field name", p)
			}
			part := s.field
			if s.each {
				part += "[]"
			}
			parts = append(parts, part)
		}
		if got := strings.Join(parts, "."); got != p {
			t.Fatalf("%q parsed into %v, which spells %q", p, segs, got)
		}
	})
}

// FuzzPairs: reading (name, key) pairs along any two paths through any JSON
// object never panics, and returns only non-empty names.
func FuzzPairs(f *testing.F) {
	f.Add(`{"spec":{"listeners":[{"certSecret":"a","certKey":"a.crt"},{"certSecret":"b"},{"port":80}]}}`, "spec.listeners[].certSecret", "spec.listeners[].certKey", "tls.crt")
	f.Add(`{"spec":{"tls":{"caCertSecretRef":"ca"}}}`, "spec.tls.caCertSecretRef", "spec.tls.caCertSecretKey", "ca.crt")
	f.Add(`{"spec":[1,"x",null,{"a":[{"b":"c"}]}]}`, "spec[].a[].b", "", "")
	f.Add(`[]`, "a", "b", "")
	f.Fuzz(func(t *testing.T, doc, namePath, keyPath, keyDefault string) {
		var obj any
		if json.Unmarshal([]byte(doc), &obj) != nil {
			return
		}
		np, err := parsePath(namePath)
		if err != nil {
			return
		}
		name := field{path: np}
		var key *field
		if kp, err := parsePath(keyPath); err == nil && (len(kp) > 0 || keyDefault != "") {
			key = &field{path: kp, def: keyDefault}
		}
		for _, p := range pairs(obj, name, key) {
			if p.name == "" {
				t.Fatalf("an empty name from %s along %q", doc, namePath)
			}
		}
		_ = name.values(obj)
	})
}

// FuzzCompile: any set of rules (as JSON) either compiles or is refused with
// an error; it never panics, and compiling the same rules twice gives the
// same kinds.
func FuzzCompile(f *testing.F) {
	seed, err := json.Marshal([]v1alpha1.ReferenceRule{
		{Spec: v1alpha1.ReferenceRuleSpec{
			Target:     v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "ModelConfig"},
			SecretRefs: []v1alpha1.DataRef{{Name: v1alpha1.FieldRef{Path: "spec.apiKeySecret"}, Key: &v1alpha1.FieldRef{Path: "spec.apiKeySecretKey", Default: "api-key"}}},
			ReferencedBy: []v1alpha1.Referrer{{
				Target: v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "Agent"},
				Name:   v1alpha1.FieldRef{Path: "spec.declarative.modelConfig", Default: "default-model-config"},
			}},
		}},
		{Spec: v1alpha1.ReferenceRuleSpec{
			Target:    v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "Agent"},
			Workloads: &v1alpha1.WorkloadRule{OwnerReferences: &v1alpha1.OwnerReferences{}},
		}},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`[{"spec":{"target":{"version":"v1","kind":"X"},"secretRefs":[{"name":{"path":"a..b"}}]}}]`))
	f.Add([]byte(`[{"spec":{"target":{"version":"v1","kind":"X"},"workloads":{"labelSelector":{"path":"spec.selector"}}}}]`))
	f.Add([]byte(`[{"spec":{"target":{"version":"v1","kind":"X"},"referencedBy":[{"target":{"version":"v1","kind":"X"},"name":{"path":"spec.self"}}]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rules []v1alpha1.ReferenceRule
		if json.Unmarshal(data, &rules) != nil {
			return
		}
		g, err := Compile(rules)
		if err != nil {
			return
		}
		again, err := Compile(rules)
		if err != nil {
			t.Fatalf("compiled once, then: %v", err)
		}
		if a, b := g.Kinds(), again.Kinds(); len(a) != len(b) {
			t.Fatalf("kinds %v, then %v", a, b)
		}
	})
}
