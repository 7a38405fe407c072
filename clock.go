package hotcert

import (
	"sync"
	"time"
)

// Clock is a clock a [Reloader] can wait on as well as read. [WithClock] gives
// validation a clock to read (a Reloader waiting for a NotBefore then looks at it
// once a second); [WithTimerClock] gives it a Clock, and then a Reloader waits on
// it for the NotBefore of a refused renewal, so that a test
// or a simulation that moves the clock sees the renewal adopted when it passes
// NotBefore, without waiting for real time.
//
// The wall clock is time.Now with time.AfterFunc; a fake clock (such as
// hotcerttest.FakeClock) runs the functions whose time it moves past.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f, in its own goroutine, once d has passed on the clock,
	// unless stop is called before; stop reports whether it prevented the call
	// (as time.Timer.Stop does).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// wallAfterFunc is the wall clock's AfterFunc.
func wallAfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// readClockPollInterval bounds how late a [Reloader] given only a clock to read
// ([WithClock]) notices that clock passing a refused renewal's NotBefore: nothing
// wakes it when such a clock is moved, so it looks at the clock this often.
var readClockPollInterval = time.Second

// readClockAfterFunc is the AfterFunc of a clock that can only be read: it calls
// f once now has passed d from the call, looking at now at least every
// readClockPollInterval of wall time. A clock moved forward (a test, a
// simulation) is seen within one interval; one running at wall speed costs one
// wake-up per interval while a renewal waits for its NotBefore.
func readClockAfterFunc(now func() time.Time) func(time.Duration, func()) func() bool {
	return func(d time.Duration, f func()) func() bool {
		deadline := now().Add(d)
		var (
			mu      sync.Mutex
			done    bool
			timer   *time.Timer
			arm     func()
			waitFor = func() time.Duration { return max(min(deadline.Sub(now()), readClockPollInterval), 0) }
		)
		arm = func() {
			timer = time.AfterFunc(waitFor(), func() {
				mu.Lock()
				if done {
					mu.Unlock()
					return
				}
				if now().Before(deadline) {
					arm()
					mu.Unlock()
					return
				}
				done = true
				mu.Unlock()
				f()
			})
		}
		mu.Lock()
		arm()
		mu.Unlock()
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			if done {
				return false
			}
			done = true
			timer.Stop()
			return true // f will not run, whichever timer was armed
		}
	}
}

// funcClock is a Clock made of its two functions.
type funcClock struct {
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool
}

func (c funcClock) Now() time.Time { return c.now() }

func (c funcClock) AfterFunc(d time.Duration, f func()) func() bool { return c.afterFunc(d, f) }
