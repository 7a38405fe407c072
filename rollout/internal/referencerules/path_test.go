package referencerules

import (
	"reflect"
	"testing"
)

func TestPairsReadNameAndKeyFromTheSameListElement(t *testing.T) {
	obj := map[string]any{"spec": map[string]any{
		"tls": map[string]any{"caCertSecretRef": "ca"},
		"listeners": []any{
			map[string]any{"certSecret": "a", "certKey": "a.crt"},
			map[string]any{"certSecret": "b"},
			map[string]any{"port": int64(80)},
		},
	}}
	name := func(p, def string) field {
		s, err := parsePath(p)
		if err != nil {
			t.Fatal(err)
		}
		return field{path: s, def: def}
	}
	key := name("spec.listeners[].certKey", "tls.crt")
	got := pairs(obj, name("spec.listeners[].certSecret", ""), &key)
	want := []pair{{"a", "a.crt"}, {"b", "tls.crt"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listeners: got %v, want %v", got, want)
	}
	k2 := name("spec.tls.caCertSecretKey", "ca.crt")
	if got := pairs(obj, name("spec.tls.caCertSecretRef", ""), &k2); !reflect.DeepEqual(got, []pair{{"ca", "ca.crt"}}) {
		t.Errorf("tls: got %v", got)
	}
	// No key: every key; absent name with a default.
	if got := pairs(obj, name("spec.missing", "fallback"), nil); !reflect.DeepEqual(got, []pair{{"fallback", ""}}) {
		t.Errorf("default: got %v", got)
	}
	if got := pairs(obj, name("spec.missing", ""), nil); len(got) != 0 {
		t.Errorf("absent: got %v", got)
	}
	for _, bad := range []string{".spec", "spec..a", "spec.a[0]", "spec a"} {
		if _, err := parsePath(bad); err == nil {
			t.Errorf("parsePath(%q) accepted", bad)
		}
	}
}
