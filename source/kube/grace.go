package kube

import (
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/hotcert/hotcert"
)

// Why a read from the API server failed, for the grace: refused (401, 403), or
// not answered (anything else but "does not exist", which is an answer).
const (
	refused = iota
	unanswered
	failureKinds
)

// grace holds back the failures of reads that an API server restart causes: it
// remembers the last answer to a read (the objects, or "does not exist") and,
// while reads fail, returns that answer until the failure has lasted the window,
// measured from the first failure of its kind since the last answer. A restarting
// API server is unreachable for a moment, then refuses reads for a moment more
// while its authorizer warms up: each alone is shorter than the window, though
// both together may not be. A failure that lasts (access revoked for real) is
// returned once the window is over; wake then tells the reloader to read again.
//
// T is what a read returns: one object, or a list of them.
type grace[T any] struct {
	window time.Duration
	clock  clock.WithDelayedExecution
	wake   func() // asks for a read when a window ends

	mu       sync.Mutex
	answered bool                      // last and lastErr hold an answer
	last     T                         // the last objects read,
	lastErr  error                     // or the "does not exist" error that answered instead
	since    [failureKinds]time.Time   // first failure of each kind since the last answer; zero when none
	timers   [failureKinds]clock.Timer // fire at the end of each window
}

func newGrace[T any](c config, wake func()) *grace[T] {
	return &grace[T]{window: c.grace, clock: c.clock, wake: wake}
}

// read passes on the outcome of one read (v, err) or, while a failure is in its
// window, the last answer instead. A nil err or one that says the object does not
// exist is an answer; it ends every window.
func (g *grace[T]) read(v T, err error) (T, error) {
	kind := failureOf(err)
	g.mu.Lock()
	defer g.mu.Unlock()
	if kind < 0 {
		g.answered, g.last, g.lastErr = true, v, err
		for k := range g.since {
			g.since[k] = time.Time{}
			if g.timers[k] != nil {
				g.timers[k].Stop()
				g.timers[k] = nil
			}
		}
		return v, err
	}
	if !g.answered || g.window <= 0 {
		return v, err
	}
	now := g.clock.Now()
	if g.since[kind].IsZero() {
		g.since[kind] = now
		g.timers[kind] = g.clock.AfterFunc(g.window, g.wake)
	}
	if now.Sub(g.since[kind]) < g.window {
		return g.last, g.lastErr
	}
	return v, err
}

// failureOf returns the kind of failure err is, or -1 when err is an answer.
func failureOf(err error) int {
	switch {
	case err == nil || hotcert.ReasonOf(err) == hotcert.ReasonMissing:
		return -1
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return refused
	}
	return unanswered
}
