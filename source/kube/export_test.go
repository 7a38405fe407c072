package kube

import (
	"time"

	"k8s.io/utils/clock"
)

// cachedObjects returns how many objects the informer holds (the tests check
// that a field-selected informer holds only the objects it follows).
func (f *follower) cachedObjects() int {
	if st := f.store.Load(); st != nil {
		return len((*st).ListKeys())
	}
	return 0
}

// withClock sets the clock of the refusal grace.
func withClock(c clock.WithDelayedExecution) Option {
	return optionFunc(func(cf *config) { cf.clock = c })
}

// failingSince returns when the first failure of kind (refused, unanswered) since
// the last answer was read; zero when none.
func (g *grace[T]) failingSince(kind int) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.since[kind]
}
