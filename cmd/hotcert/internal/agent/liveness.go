package agent

import (
	"sync/atomic"
	"time"
)

// liveness judges whether a stream's control plane went silent: it answered none
// of the last misses heartbeats the agent sent, and nothing arrived for timeout.
//
// Time alone is not enough: when the agent's own process does not run (a CPU-starved
// machine, a throttled container, a long pause), the answers wait unread in the
// socket while the clock runs on, and the heartbeat ticker can win the race against
// the receive loop when the process runs again. A ticker delivers one tick after a
// pause however long, so a pause sends one heartbeat: counting the heartbeats sent
// tells a silent control plane from an agent that could not listen.
//
// received is called by the receive loop, due and sent by the heartbeat loop.
type liveness struct {
	timeout time.Duration
	misses  int64

	lastRecv   atomic.Int64 // unix nanoseconds of the last message received
	unanswered atomic.Int64 // heartbeats sent since then
}

// newLiveness judges with timeout, over as many heartbeats as fit in it (at least
// one), from now.
func newLiveness(interval, timeout time.Duration, now time.Time) *liveness {
	l := &liveness{timeout: timeout, misses: max(1, int64(timeout/interval))}
	l.received(now)
	return l
}

// received records a message from the control plane: it is alive.
func (l *liveness) received(now time.Time) {
	l.lastRecv.Store(now.UnixNano())
	l.unanswered.Store(0)
}

// silent reports, before a heartbeat is sent at now, whether the control plane is
// silent, and for how long nothing arrived.
func (l *liveness) silent(now time.Time) (bool, time.Duration) {
	d := now.Sub(time.Unix(0, l.lastRecv.Load()))
	return d > l.timeout && l.unanswered.Load() >= l.misses, d
}

// sent records a heartbeat sent.
func (l *liveness) sent() { l.unanswered.Add(1) }
