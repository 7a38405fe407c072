package rotation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// WaitOptions say what Wait waits for.
type WaitOptions struct {
	// Step is the step to wait for (StepAddNewCA, StepSwitchServerCert,
	// StepRemoveOldCA), or WaitComplete for the end of the rotation.
	Step string
	// Timeout bounds the wait (0: until ctx is done).
	Timeout time.Duration
	// Interval is the time between two looks (default 2s).
	Interval time.Duration
	// OnReport, if set, is called with every report, before Wait decides on it.
	OnReport func(*Report)
}

// ErrNotSafe is returned (wrapped, with the step's reason) when the step did not
// become safe in time.
var ErrNotSafe = errors.New("step not safe")

// ErrNotComplete is returned (wrapped, with the rotation's summary) when the
// rotation did not complete in time (WaitComplete).
var ErrNotComplete = errors.New("rotation not complete")

// checkStep reports whether name is a step or WaitComplete.
func checkStep(name string) error {
	if name != WaitComplete && !slices.Contains(Steps(), name) {
		return fmt.Errorf("rotation: step %q: want one of %s or %s", name, strings.Join(Steps(), ", "), WaitComplete)
	}
	return nil
}

// reached says whether rep shows what w waits for, and otherwise why not (naming
// the stragglers) and the error to wrap.
func (w WaitOptions) reached(rep *Report) (ok bool, why string, notYet error) {
	if w.Step == WaitComplete {
		if rep.Next == "" {
			return true, rep.Summary, nil
		}
		st, _ := rep.Step(rep.Next)
		return false, fmt.Sprintf("step %s not done: %s", rep.Next, st.Why), ErrNotComplete
	}
	st, _ := rep.Step(w.Step)
	return st.Safe, st.Why, ErrNotSafe
}

// Wait looks at the rotation every Interval until the step is safe (with
// WaitComplete: until every step is done), and returns that report at once; or,
// once Timeout has passed, the last report and an error wrapping ErrNotSafe (or
// ErrNotComplete) that names the stragglers. Bad input is an error at once.
//
// Between looks it remembers the agents it saw: one that no replica lists any more
// (its replica restarted and forgot it) counts as departed, not proven, until it is
// back or the time the replicas declare they keep departed agents has passed.
func Wait(ctx context.Context, o Options, w WaitOptions) (*Report, error) {
	if err := checkStep(w.Step); err != nil {
		return nil, err
	}
	if w.Interval <= 0 {
		w.Interval = 2 * time.Second
	}
	// The timeout stops further looks, never one in flight (each probe has its own
	// bound), so the last report is a whole one.
	var expired <-chan time.Time
	if w.Timeout > 0 {
		deadline := time.NewTimer(w.Timeout)
		defer deadline.Stop()
		expired = deadline.C
	}
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	mem := newMemory()
	for {
		rep, err := check(ctx, o, mem)
		if err != nil {
			return nil, err
		}
		if w.OnReport != nil {
			w.OnReport(rep)
		}
		ok, why, notYet := w.reached(rep)
		if ok {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("rotation: waiting for %s: %w: %s", w.Step, ctx.Err(), why)
		case <-expired:
			if notYet == ErrNotComplete {
				return rep, fmt.Errorf("rotation: %w after %s: %s", notYet, w.Timeout, why)
			}
			return rep, fmt.Errorf("rotation: %s %w after %s: %s", w.Step, notYet, w.Timeout, why)
		case <-t.C:
		}
	}
}
