package reload

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"
)

// stringSource is a Source of one string that a test sets by hand.
type stringSource struct {
	mu sync.Mutex
	s  string
}

func (s *stringSource) set(v string) { s.mu.Lock(); s.s = v; s.mu.Unlock() }
func (s *stringSource) Read(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.s, nil
}
func (s *stringSource) Watch(ctx context.Context, _ func()) error { <-ctx.Done(); return nil }
func (s *stringSource) String() string                            { return "strings" }

var errBad = errors.New("bad content")

func newStringEngine(src *stringSource, settle time.Duration) *Engine[string, string] {
	var cur string
	return New[string, string](src, Spec[string, string]{
		Hash: func(s string) [32]byte { return sha256.Sum256([]byte(s)) },
		Validate: func(s string) (string, error) {
			if s == "good" {
				return s, nil
			}
			return "", errBad
		},
		CurrentHash: func() [32]byte { return sha256.Sum256([]byte(cur)) },
		Publish:     func(v string) { cur = v },
		Failed:      func(error) {},
		Settle:      settle,
	})
}

// TestSettleBackoffOnlyPacesRereadsWithoutNews: a non-atomic writer produces
// several failing contents in a row (each announced by an event). Each one is news:
// the next look comes after the first, short retry delay, never after a delay
// doubled by the earlier steps of the same write. Only re-reads of the same content
// without news (the retry timer, a poll) back off.
func TestSettleBackoffOnlyPacesRereadsWithoutNews(t *testing.T) {
	src := &stringSource{}
	e := newStringEngine(src, time.Hour)
	ctx := context.Background()
	step := func(why cause, want time.Duration) {
		t.Helper()
		if err := e.check(ctx, why); !errors.Is(err, errBad) {
			t.Fatalf("check = %v, want the validation error", err)
		}
		if e.retryIn != want {
			t.Fatalf("next look in %v, want %v", e.retryIn, want)
		}
	}
	for _, part := range []string{"cert truncated", "cert half", "cert written", "key truncated", "key half"} {
		src.set(part)
		step(causeEvent, firstRetry) // news: look again soon
	}
	step(causeRetry, 2*firstRetry) // no news: back off
	step(causeRetry, 4*firstRetry)
	step(causePoll, 8*firstRetry)
	step(causeEvent, firstRetry) // a (late, merged) event about the same bytes is news
	step(causeRetry, 2*firstRetry)
	src.set("key written, still bad")
	step(causeRetry, firstRetry) // the timer found new content: news too
	src.set("good")
	if err := e.check(ctx, causeRetry); err != nil || e.retryIn != 0 {
		t.Fatalf("good content: %v, next look in %v", err, e.retryIn)
	}
}

// TestSettleWindowStillEndsInAFailure: resetting the backoff on news never extends
// the settle window: content that keeps failing is reported once it has failed for
// the whole window, counted from its first failing look.
func TestSettleWindowStillEndsInAFailure(t *testing.T) {
	src := &stringSource{s: "bad"}
	e := newStringEngine(src, 0)
	var failed int
	e.spec.Failed = func(error) { failed++ }
	for range 3 {
		_ = e.check(context.Background(), causeEvent)
	}
	if failed != 1 || e.Status().Failures != 1 {
		t.Fatalf("reported %d times, want once", failed)
	}
}
