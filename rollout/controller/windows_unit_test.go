package controller

import (
	"testing"
	"time"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/window"
)

// TestScheduleRollAt: open rolls now; closed waits for the earlier of the
// next window and the deadline; past the deadline overrides; a malformed
// declaration opens no window, but the deadline still holds; without a known
// certificate nothing overrides.
func TestScheduleRollAt(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	next, deadline := now.Add(10*time.Hour), now.Add(3*time.Hour)
	ws, err := window.Parse("0 22 * * * for 1h")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		s        schedule
		at       time.Time
		override bool
	}{
		{"open", schedule{windows: ws, open: true}, now, false},
		{"closed, next window first", schedule{windows: ws, next: next, deadline: now.Add(11 * time.Hour)}, next, false},
		{"closed, deadline first", schedule{windows: ws, next: next, deadline: deadline}, deadline, false},
		{"past the deadline", schedule{windows: ws, next: next, deadline: now.Add(-time.Second)}, now, true},
		{"at the deadline", schedule{windows: ws, next: next, deadline: now}, now, true},
		{"unknown certificate", schedule{windows: ws, next: next}, next, false},
		{"no window again, no certificate", schedule{windows: ws}, time.Time{}, false},
		{"malformed", schedule{invalid: errTest, open: true, next: next, deadline: deadline}, deadline, false},
		{"malformed, unknown certificate", schedule{invalid: errTest, open: true, next: next}, time.Time{}, false},
	} {
		at, override := c.s.rollAt(now)
		if !at.Equal(c.at) || override != c.override {
			t.Errorf("%s: at %s override %v, want %s %v", c.name, at, override, c.at, c.override)
		}
	}
}

var errTest = errTestT("malformed")

type errTestT string

func (e errTestT) Error() string { return string(e) }

// TestExpiryMargin: the default is a sixth of the lifetime; the annotation
// takes a percentage or a duration; anything else is refused with the
// annotation named (and the default used).
func TestExpiryMargin(t *testing.T) {
	for _, c := range []struct {
		text string
		d    time.Duration
		f    float64
		ok   bool
	}{{"25%", 0, 0.25, true}, {" 10 % ", 0, 0.10, true}, {"6h", 6 * time.Hour, 0, true},
		{"0%", 0, 0, false}, {"100%", 0, 0, false}, {"-1h", 0, 0, false}, {"soon", 0, 0, false}, {"", 0, 0, false}} {
		d, f, err := parseMargin(c.text)
		if (err == nil) != c.ok || d != c.d || f != c.f {
			t.Errorf("%q: %v %v %v", c.text, d, f, err)
		}
	}
	r := &reconciler{opts: Options{}.Default()}
	v := rollout.Validity{NotBefore: time.Unix(0, 0), NotAfter: time.Unix(0, 0).Add(24 * time.Hour)}
	if m := time.Duration(float64(v.Lifetime()) * r.opts.ExpiryMargin); m != 4*time.Hour {
		t.Errorf("default margin of a 24-hour certificate %s, want 4h", m)
	}
}

// TestRotateStampAndPending: two tokens give two stamps (each a rollout),
// the same token the same; a pending annotation's since= reads back.
func TestRotateStampAndPending(t *testing.T) {
	if rotateStamp("h", "a") == rotateStamp("h", "b") || rotateStamp("h", "a") != rotateStamp("h", "a") || rotateStamp("h", "a") == "h" {
		t.Fatal("rotate stamps do not tell tokens apart")
	}
	since := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	v := pendingValue(since, since.Add(time.Hour), schedule{deadline: since.Add(2 * time.Hour)})
	if v != "since=2026-12-02T03:00:00Z; rolls-at=2026-12-02T04:00:00Z; deadline=2026-12-02T05:00:00Z; reason=outside_window" {
		t.Fatalf("pending %q", v)
	}
	if got := pendingSince(v); !got.Equal(since) {
		t.Fatalf("since %s", got)
	}
	if !pendingSince("garbage").IsZero() {
		t.Fatal("since of garbage")
	}
}
