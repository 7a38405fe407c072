package rollout_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/naming"
)

// objects builds a Lookup over Secrets given as name -> data.
func objects(secrets map[string]map[string]string) rollout.Lookup {
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		data, ok := secrets[name]
		if !ok || kind != rollout.KindSecret {
			return nil, nil
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return rollout.SecretObject(s, testNow), nil
	}
}

func mustCompute(t *testing.T, refs rollout.Refs, secrets map[string]map[string]string, opts ...rollout.HashOption) *rollout.Config {
	t.Helper()
	cfg, err := rollout.Compute("ns", refs, objects(secrets), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func keysRef(name string, keys ...string) rollout.Ref {
	r := rollout.Ref{Kind: rollout.KindSecret, Name: name}
	for _, k := range keys {
		r.Keys = append(r.Keys, rollout.KeyRef{Key: k})
	}
	return r
}

func TestHashOnlyConsumedKeys(t *testing.T) {
	refs := rollout.Refs{keysRef("s", "a")}
	base := mustCompute(t, refs, map[string]map[string]string{"s": {"a": "1", "b": "2"}})
	other := mustCompute(t, refs, map[string]map[string]string{"s": {"a": "1", "b": "changed", "c": "new"}})
	if base.Hash != other.Hash {
		t.Error("a key the workload does not consume changed the hash")
	}
	changed := mustCompute(t, refs, map[string]map[string]string{"s": {"a": "2", "b": "2"}})
	if base.Hash == changed.Hash {
		t.Error("a consumed key changed but the hash did not")
	}
	if len(base.Hash) != 64 {
		t.Errorf("hash %q is not hex SHA-256", base.Hash)
	}
	// A whole-object reference sees added and removed keys.
	all := rollout.Refs{{Kind: rollout.KindSecret, Name: "s", All: true}}
	h1 := mustCompute(t, all, map[string]map[string]string{"s": {"a": "1"}})
	h2 := mustCompute(t, all, map[string]map[string]string{"s": {"a": "1", "b": ""}})
	if h1.Hash == h2.Hash {
		t.Error("adding an (empty) key to a fully consumed Secret did not change the hash")
	}
}

func TestHashUnambiguous(t *testing.T) {
	all := rollout.Refs{{Kind: rollout.KindSecret, Name: "s", All: true}}
	// Every pair below concatenates to the same bytes under a naive encoding
	// ("key=value;..." or key||value).
	pairs := [][2]map[string]string{
		{{"a": "bc"}, {"ab": "c"}},
		{{"a": "1;b=2"}, {"a": "1", "b": "2"}},
		{{"k": ""}, {"k=": ""}},
	}
	for _, p := range pairs {
		x := mustCompute(t, all, map[string]map[string]string{"s": p[0]})
		y := mustCompute(t, all, map[string]map[string]string{"s": p[1]})
		if x.Hash == y.Hash {
			t.Errorf("%v and %v hash the same", p[0], p[1])
		}
	}
	// Object boundaries: Secret "a" key "b/c" cannot be confused with "a/b" key "c"
	// (names cannot hold '/', but the encoding must not rely on it).
	x := mustCompute(t, rollout.Refs{keysRef("ab", "c")}, map[string]map[string]string{"ab": {"c": "v"}})
	y := mustCompute(t, rollout.Refs{keysRef("a", "bc")}, map[string]map[string]string{"a": {"bc": "v"}})
	if x.Hash == y.Hash {
		t.Error("object/key boundary is ambiguous")
	}
	// Deterministic, and independent of map order.
	for range 20 {
		if z := mustCompute(t, rollout.Refs{keysRef("ab", "c")}, map[string]map[string]string{"ab": {"c": "v"}}); z.Hash != x.Hash {
			t.Fatal("hash is not deterministic")
		}
	}
	// No value appears in the output, and the recorded digests are not the
	// plain SHA-256 of a value.
	plain := sha256.Sum256([]byte("v"))
	if e := x.Entries["Secret/ab/c"]; len(e) != 16 || e == hex.EncodeToString(plain[:8]) {
		t.Errorf("entry %q is not a salted 64-bit digest", e)
	}
}

func TestHashKey(t *testing.T) {
	refs := rollout.Refs{keysRef("s", "a")}
	data := map[string]map[string]string{"s": {"a": "hunter2"}}
	plain := mustCompute(t, refs, data)
	k1 := mustCompute(t, refs, data, rollout.WithHashKey([]byte("0123456789abcdef")))
	k2 := mustCompute(t, refs, data, rollout.WithHashKey([]byte("fedcba9876543210")))
	if plain.Hash == k1.Hash || k1.Hash == k2.Hash {
		t.Error("the hash key does not key the hash")
	}
	if plain.Entries["Secret/s/a"] == k1.Entries["Secret/s/a"] {
		t.Error("the hash key does not key the recorded digests")
	}
	if plain.Entries[naming.KeyIDEntry] == k1.Entries[naming.KeyIDEntry] {
		t.Error("the key id entry does not identify the key")
	}
}

func TestComputeProblems(t *testing.T) {
	refs := rollout.Refs{
		keysRef("present", "a", "missing"),
		keysRef("gone"),
		{Kind: rollout.KindSecret, Name: "optional", Optional: true, All: true},
		{Kind: rollout.KindSecret, Name: "present2", Keys: []rollout.KeyRef{{Key: "opt", Optional: true}}},
	}
	cfg := mustCompute(t, refs, map[string]map[string]string{"present": {"a": "1"}, "present2": {}})
	want := []string{"Secret present has no key missing", "Secret gone not found"}
	if len(cfg.Missing) != len(want) {
		t.Fatalf("Missing = %v, want %v", cfg.Missing, want)
	}
	for _, p := range cfg.Missing {
		found := false
		for _, w := range want {
			found = found || p.String() == w
		}
		if !found {
			t.Errorf("unexpected problem %q", p)
		}
	}
	if cfg.Entries["Secret/optional"] != "-" || cfg.Entries["Secret/present2/opt"] != "-" {
		t.Errorf("absent optional object/key not recorded as absent: %v", cfg.Entries)
	}
}
