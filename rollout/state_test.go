package rollout_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/hotcert/hotcert/rollout"
)

func TestStateRoundTrip(t *testing.T) {
	cfg := mustCompute(t, rollout.Refs{keysRef("s", "a")}, map[string]map[string]string{"s": {"a": "1"}})
	at := time.Date(2026, 8, 22, 10, 0, 0, 123_000_000, time.UTC)
	s := rollout.State{}.Rolled(cfg, at)
	ann := s.Annotations()
	if ann[rollout.AnnotationLastRollout] != "2026-08-22T10:00:00.123Z" {
		t.Errorf("last rollout = %q", ann[rollout.AnnotationLastRollout])
	}
	back := rollout.StateOf(ann)
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, s)
	}
	if !back.Adopted() || len(back.Changes(cfg)) != 0 {
		t.Error("state of cfg shows changes against cfg")
	}
	if got := rollout.StateOf(map[string]string{rollout.AnnotationAppliedKeys: "{not json", rollout.AnnotationLastRollout: "yesterday"}); got.Keys != nil || !got.LastRollout.IsZero() {
		t.Errorf("unreadable annotations read as %+v", got)
	}
}

func TestChanges(t *testing.T) {
	refs := rollout.Refs{keysRef("tls", "tls.crt", "tls.key"), {Kind: rollout.KindSecret, Name: "env", All: true}}
	base := map[string]map[string]string{"tls": {"tls.crt": "c1", "tls.key": "k1", "ca.crt": "x"}, "env": {"A": "1"}}
	state := rollout.State{}.Applied(mustCompute(t, refs, base))

	describe := func(data map[string]map[string]string) string {
		return rollout.Describe(state.Changes(mustCompute(t, refs, data)), 10)
	}
	if got := describe(map[string]map[string]string{"tls": {"tls.crt": "c1", "tls.key": "k1", "ca.crt": "other"}, "env": {"A": "1"}}); got != "" {
		t.Errorf("unconsumed key: changes %q", got)
	}
	if got := describe(map[string]map[string]string{"tls": {"tls.crt": "c2", "tls.key": "k1"}, "env": {"A": "1"}}); got != "Secret tls key tls.crt changed" {
		t.Errorf("got %q", got)
	}
	if got := describe(map[string]map[string]string{"tls": {"tls.crt": "c1", "tls.key": "k1"}, "env": {"A": "1", "B": "2"}}); got != "Secret env key B added" {
		t.Errorf("got %q", got)
	}
	if got := describe(map[string]map[string]string{"tls": {"tls.crt": "c1", "tls.key": "k1"}, "env": {}}); got != "Secret env key A removed" {
		t.Errorf("got %q", got)
	}

	// A pod-template edit that references another object is not a content
	// change: the edit rolls the workload by itself.
	more := append(rollout.Refs{keysRef("added", "x")}, refs...)
	cfg := mustCompute(t, more, map[string]map[string]string{"added": {"x": "1"}, "tls": base["tls"], "env": base["env"]})
	if ch := state.Changes(cfg); len(ch) != 0 || cfg.Hash == state.AppliedHash {
		t.Errorf("a new reference reads as changes %v (or the hash did not move)", ch)
	}

	// Without per-key digests, the hash decides.
	bare := rollout.State{AppliedHash: state.AppliedHash}
	if ch := bare.Changes(mustCompute(t, refs, map[string]map[string]string{"tls": {"tls.crt": "c2", "tls.key": "k1"}, "env": {"A": "1"}})); len(ch) != 1 {
		t.Errorf("changes without record = %v", ch)
	}
}

func TestNextRollout(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := rollout.State{LastRollout: now.Add(-4 * time.Second)}
	if got := s.NextRollout(10*time.Second, now); !got.Equal(now.Add(6 * time.Second)) {
		t.Errorf("next = %v", got)
	}
	if got := s.NextRollout(3*time.Second, now); !got.IsZero() {
		t.Errorf("interval passed, next = %v", got)
	}
	if got := (rollout.State{}).NextRollout(time.Hour, now); !got.IsZero() {
		t.Errorf("never rolled, next = %v", got)
	}
	d, err := rollout.MinInterval(map[string]string{rollout.AnnotationMinInterval: "2m"}, time.Minute)
	if d != 2*time.Minute || err != nil {
		t.Errorf("MinInterval = %v, %v", d, err)
	}
	d, err = rollout.MinInterval(map[string]string{rollout.AnnotationMinInterval: "soon"}, time.Minute)
	if d != time.Minute || err == nil {
		t.Errorf("bad MinInterval = %v, %v", d, err)
	}
}

func TestBudget(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := rollout.NewBudget(3, time.Minute)
	b.Observe("w0", now.Add(-30*time.Second), now) // a previous leader's rollout
	b.Observe("w0", now.Add(-30*time.Second), now) // seen twice, counted once
	b.Observe("old", now.Add(-2*time.Minute), now) // outside the window
	for i, w := range []string{"w1", "w2"} {
		if retry := b.Take(w, now.Add(time.Duration(i)*time.Second)); !retry.IsZero() {
			t.Fatalf("take %s refused until %v", w, retry)
		}
	}
	retry := b.Take("w3", now.Add(2*time.Second))
	if !retry.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("retry = %v, want when w0's rollout leaves the window", retry)
	}
	if retry := b.Take("w3", now.Add(31*time.Second)); !retry.IsZero() {
		t.Fatalf("after the window, still refused until %v", retry)
	}
	if used := b.Used(now.Add(31 * time.Second)); used != 3 {
		t.Errorf("used = %d", used)
	}
	b.Release("w3", now.Add(31*time.Second))
	if used := b.Used(now.Add(31 * time.Second)); used != 2 {
		t.Errorf("used after release = %d", used)
	}
	if retry := rollout.NewBudget(-1, time.Minute).Take("w", now); !retry.IsZero() {
		t.Error("unlimited budget refused")
	}
}
