package state_test

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"reflect"
	"testing"
	"time"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

func TestStateRoundTrip(t *testing.T) {
	cfg := mustCompute(t, rollout.Refs{keysRef("s", "a")}, map[string]map[string]string{"s": {"a": "1"}})
	at := time.Date(2026, 8, 22, 10, 0, 0, 123_000_000, time.UTC)
	s := state.State{}.Rolled(cfg, at)
	ann := s.Annotations()
	if ann[rollout.AnnotationLastRollout] != "2026-08-22T10:00:00.123Z" {
		t.Errorf("last rollout = %q", ann[rollout.AnnotationLastRollout])
	}
	back := state.Of(ann)
	if !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, s)
	}
	if !back.Adopted() || len(back.Changes(cfg)) != 0 {
		t.Error("state of cfg shows changes against cfg")
	}
	if got := state.Of(map[string]string{rollout.AnnotationAppliedKeys: "{not json", rollout.AnnotationLastRollout: "yesterday"}); got.Keys != nil || !got.LastRollout.IsZero() {
		t.Errorf("unreadable annotations read as %+v", got)
	}
}

func TestChanges(t *testing.T) {
	refs := rollout.Refs{keysRef("tls", "tls.crt", "tls.key"), {Kind: rollout.KindSecret, Name: "env", All: true}}
	base := map[string]map[string]string{"tls": {"tls.crt": "c1", "tls.key": "k1", "ca.crt": "x"}, "env": {"A": "1"}}
	recorded := state.State{}.Applied(mustCompute(t, refs, base))

	describe := func(data map[string]map[string]string) string {
		return state.Describe(recorded.Changes(mustCompute(t, refs, data)), 10)
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
	if ch := recorded.Changes(cfg); len(ch) != 0 || cfg.Hash == recorded.AppliedHash {
		t.Errorf("a new reference reads as changes %v (or the hash did not move)", ch)
	}

	// Without per-key digests, the hash decides.
	bare := state.State{AppliedHash: recorded.AppliedHash}
	if ch := bare.Changes(mustCompute(t, refs, map[string]map[string]string{"tls": {"tls.crt": "c2", "tls.key": "k1"}, "env": {"A": "1"}})); len(ch) != 1 {
		t.Errorf("changes without record = %v", ch)
	}
}

func TestNextRollout(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := state.State{LastRollout: now.Add(-4 * time.Second)}
	if got := s.NextRollout(10*time.Second, now); !got.Equal(now.Add(6 * time.Second)) {
		t.Errorf("next = %v", got)
	}
	if got := s.NextRollout(3*time.Second, now); !got.IsZero() {
		t.Errorf("interval passed, next = %v", got)
	}
	if got := (state.State{}).NextRollout(time.Hour, now); !got.IsZero() {
		t.Errorf("never rolled, next = %v", got)
	}
	d, err := state.MinInterval(map[string]string{rollout.AnnotationMinInterval: "2m"}, time.Minute)
	if d != 2*time.Minute || err != nil {
		t.Errorf("MinInterval = %v, %v", d, err)
	}
	d, err = state.MinInterval(map[string]string{rollout.AnnotationMinInterval: "soon"}, time.Minute)
	if d != time.Minute || err == nil {
		t.Errorf("bad MinInterval = %v, %v", d, err)
	}
}

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
		return rollout.SecretObject(s, time.Now()), nil
	}
}

func mustCompute(t *testing.T, refs rollout.Refs, secrets map[string]map[string]string) *rollout.Config {
	t.Helper()
	cfg, err := rollout.Compute("ns", refs, objects(secrets))
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
