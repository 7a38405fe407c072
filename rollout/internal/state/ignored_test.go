package state_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// withAnnotations is objects() with annotations on every Secret.
func withAnnotations(secrets map[string]map[string]string, ann map[string]string) rollout.Lookup {
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		data, ok := secrets[name]
		if !ok || kind != rollout.KindSecret {
			return nil, nil
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann}, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return rollout.SecretObject(s, time.Now()), nil
	}
}

// TestIgnoredKeys walks an exception through its life: added (no change, a
// new baseline), the ignored key changing (no change, reported as ignored),
// removed (no change, the current content is the baseline), then the key
// counting again.
func TestIgnoredKeys(t *testing.T) {
	refs := rollout.Refs{keysRef("s", "a", "b"), {Kind: rollout.KindSecret, Name: "all", All: true}}
	compute := func(a, b, allB string, ann map[string]string) *rollout.Config {
		t.Helper()
		data := map[string]map[string]string{"s": {"a": a, "b": b}, "all": {"x": "1"}}
		if allB != "" {
			data["all"]["b"] = allB
		}
		cfg, err := rollout.Compute("ns", refs, withAnnotations(data, ann))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ignoreB := map[string]string{rollout.AnnotationIgnoreKeys: "b"}
	step := func(recorded state.State, cfg *rollout.Config, wantIgnored string) state.State {
		t.Helper()
		if ch := recorded.Changes(cfg); len(ch) != 0 {
			t.Fatalf("changes %s, want none", state.Describe(ch, 10))
		}
		if got := state.Describe(recorded.Ignored(cfg), 10); got != wantIgnored {
			t.Fatalf("ignored %q, want %q", got, wantIgnored)
		}
		next := recorded.WithIgnored(cfg)
		if len(next.Ignored(cfg)) != 0 || len(next.Changes(cfg)) != 0 {
			t.Fatal("the state with the ignored changes applied still reports them")
		}
		if next.AppliedHash != cfg.Hash {
			t.Fatalf("nothing else differs, yet the applied hash is not cfg's")
		}
		return next
	}

	recorded := state.State{}.Applied(compute("1", "1", "", nil))
	recorded = step(recorded, compute("1", "1", "", ignoreB), "Secret s key b ignored from now on")
	// Absent from "all" until now: an ignored key that appears is no change.
	recorded = step(recorded, compute("1", "2", "new", ignoreB), "Secret all key b added, ignored, Secret s key b changed, ignored")
	// The annotation removed in the same edit as a change: a change.
	if got := state.Describe(recorded.Changes(compute("1", "3", "new", nil)), 10); got != "Secret s key b changed" {
		t.Fatalf("counting again with other content: %q", got)
	}
	recorded = step(recorded, compute("1", "2", "new", nil), "Secret all key b counts again, Secret s key b counts again")
	if got := state.Describe(recorded.Changes(compute("1", "4", "new", nil)), 10); got != "Secret s key b changed" {
		t.Fatalf("once counted again, a change of b: %q", got)
	}
	// A counted change next to an ignored one: the counted one is a change,
	// the ignored one is reported, and applying the ignored one keeps the
	// counted one pending.
	recorded = step(recorded, compute("1", "2", "new", ignoreB), "Secret all key b ignored from now on, Secret s key b ignored from now on")
	// Ignored from now on in the same edit as a change: an ignored change.
	if got := state.Describe(recorded.Ignored(compute("1", "9", "new", ignoreB)), 10); got != "Secret s key b changed, ignored" {
		t.Fatalf("got %q", got)
	}
	both := compute("2", "5", "new", ignoreB)
	if got := state.Describe(recorded.Changes(both), 10); got != "Secret s key a changed" {
		t.Fatalf("changes %q", got)
	}
	next := recorded.WithIgnored(both)
	if got := state.Describe(next.Changes(both), 10); got != "Secret s key a changed" || next.AppliedHash == both.Hash {
		t.Fatalf("after applying the ignored change: changes %q, hash applied %v", got, next.AppliedHash == both.Hash)
	}
}

func TestIgnoredObject(t *testing.T) {
	refs := rollout.Refs{keysRef("s", "a", "b")}
	compute := func(a string, ann map[string]string) *rollout.Config {
		t.Helper()
		cfg, err := rollout.Compute("ns", refs, withAnnotations(map[string]map[string]string{"s": {"a": a, "b": "1"}}, ann))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ignore := map[string]string{rollout.AnnotationIgnore: "true"}
	recorded := state.State{}.Applied(compute("1", nil))
	cfg := compute("1", ignore)
	if got := state.Describe(recorded.Ignored(cfg), 10); got != "Secret s ignored from now on" {
		t.Fatalf("got %q", got)
	}
	recorded = recorded.WithIgnored(cfg)
	cfg = compute("2", ignore)
	if len(recorded.Changes(cfg)) != 0 {
		t.Fatal("a change of an ignored object is a change")
	}
	if got := state.Describe(recorded.Ignored(cfg), 10); got != "Secret s key a changed, ignored" {
		t.Fatalf("got %q", got)
	}
	recorded = recorded.WithIgnored(cfg)
	cfg = compute("2", nil)
	if got := state.Describe(recorded.Ignored(cfg), 10); got != "Secret s counts again" || len(recorded.Changes(cfg)) != 0 {
		t.Fatalf("got %q", got)
	}
}
