// Package budget caps rollouts across all workloads.
package budget

import (
	"sync"
	"time"
)

// Budget caps rollouts across all workloads: at most max in any window (a
// sliding window, not a token bucket, so a mass change of 3,000 Secrets rolls
// exactly max workloads a window and never bursts beyond). It lives in memory,
// but a new leader rebuilds it from the workloads' hotcert.dev/last-rollout annotations
// through [Budget.Observe], so a restart does not grant a fresh budget. A Budget
// is safe for concurrent use.
type Budget struct {
	max    int
	window time.Duration

	mu     sync.Mutex
	events map[budgetEvent]struct{}
}

type budgetEvent struct {
	workload string
	at       time.Time
}

// New returns a Budget of max rollouts per window; max <= 0 is unlimited.
func New(max int, window time.Duration) *Budget {
	return &Budget{max: max, window: window, events: map[budgetEvent]struct{}{}}
}

// Observe records a rollout of workload at t (if within the window ending at
// now) made earlier (e.g. by a previous
// leader), so that it counts against the budget. Observing the same rollout
// twice counts it once. Times are kept to the millisecond, as annotations
// record them.
func (b *Budget) Observe(workload string, t, now time.Time) {
	if b == nil || b.max <= 0 || t.IsZero() || !t.After(now.Add(-b.window)) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events[budgetEvent{workload, t.UTC().Truncate(time.Millisecond)}] = struct{}{}
}

// Take spends one rollout for workload at now if the budget allows it and
// returns the zero time; otherwise it spends nothing and returns when the budget
// next has room.
func (b *Budget) Take(workload string, now time.Time) (retryAt time.Time) {
	if b == nil || b.max <= 0 {
		return time.Time{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	horizon := now.Add(-b.window)
	var oldest time.Time
	for e := range b.events {
		if !e.at.After(horizon) {
			delete(b.events, e)
			continue
		}
		if oldest.IsZero() || e.at.Before(oldest) {
			oldest = e.at
		}
	}
	if len(b.events) >= b.max {
		return oldest.Add(b.window)
	}
	b.events[budgetEvent{workload, now.UTC().Truncate(time.Millisecond)}] = struct{}{}
	return time.Time{}
}

// Release gives back the rollout Take spent for workload at now, when the
// rollout could not be made after all.
func (b *Budget) Release(workload string, now time.Time) {
	if b == nil || b.max <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.events, budgetEvent{workload, now.UTC().Truncate(time.Millisecond)})
}

// Used returns how many rollouts count against the budget at now.
func (b *Budget) Used(now time.Time) int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for e := range b.events {
		if e.at.After(now.Add(-b.window)) {
			n++
		}
	}
	return n
}
