package state_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// FuzzOf: the controller's state annotations, whatever a user or another
// writer put in them, are read without panicking (unreadable values as
// absent), and what the controller writes back reads the same again.
func FuzzOf(f *testing.F) {
	f.Add("abc123", `{"Secret/s":"+","Secret/s/a":"0011223344556677","#key":"none"}`, "2026-08-22T10:00:00.123Z")
	f.Add("", "{not json", "yesterday")
	f.Add("h", `{"Secret/s":1}`, "2026-08-22T10:00:00.123456789+02:00")
	f.Add("h", "null", "")
	f.Add("h", `{"":""}`, "0000-01-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, hash, keys, last string) {
		s := state.Of(map[string]string{
			rollout.AnnotationAppliedHash: hash, rollout.AnnotationAppliedKeys: keys, rollout.AnnotationLastRollout: last,
		})
		once := state.Of(s.Annotations())
		twice := state.Of(once.Annotations())
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("written state %+v reads back as %+v", once, twice)
		}
		if once.AppliedHash != hash {
			t.Fatalf("hash %q became %q", hash, once.AppliedHash)
		}
		_ = s.Changes(&rollout.Config{Hash: "x", Entries: map[string]string{"Secret/s/a": "1", "Secret/s": "-"}})
	})
}

// FuzzMinInterval: any hotcert.dev/min-interval value is a non-negative
// duration, or an error naming the annotation with the default.
func FuzzMinInterval(f *testing.F) {
	for _, v := range []string{"10m", "30s", "0s", "-1s", "soon", "1h2m3.5s", "9223372036854775807ns", "1e3s", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		const def = time.Minute
		d, err := state.MinInterval(map[string]string{rollout.AnnotationMinInterval: v}, def)
		switch {
		case err != nil && (d != def || !strings.Contains(err.Error(), rollout.AnnotationMinInterval)):
			t.Fatalf("%q: %v, %v", v, d, err)
		case err == nil && d < 0:
			t.Fatalf("%q: negative interval %v", v, d)
		}
	})
}
