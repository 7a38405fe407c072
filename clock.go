package hotcert

import "time"

// Clock is a clock a [Reloader] can wait on as well as read. [WithClock] gives
// validation a clock to read; [WithTimerClock] gives it a Clock, and then a
// Reloader also waits on it for the NotBefore of a refused renewal, so that a test
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

// funcClock is a Clock made of its two functions.
type funcClock struct {
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool
}

func (c funcClock) Now() time.Time { return c.now() }

func (c funcClock) AfterFunc(d time.Duration, f func()) func() bool { return c.afterFunc(d, f) }
