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
	// Step is the step to wait for (StepAddNewCA, StepSwitchServerCert, StepRemoveOldCA).
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

// checkStep reports whether name is a step.
func checkStep(name string) error {
	if !slices.Contains(Steps(), name) {
		return fmt.Errorf("rotation: step %q: want one of %s", name, strings.Join(Steps(), ", "))
	}
	return nil
}

// Wait looks at the rotation every Interval until the step is safe, and returns
// that report at once; or, once Timeout has passed, the last report and an error
// wrapping ErrNotSafe that names the stragglers. Bad input is an error at once.
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
	for {
		rep, err := Check(ctx, o)
		if err != nil {
			return nil, err
		}
		if w.OnReport != nil {
			w.OnReport(rep)
		}
		st, _ := rep.Step(w.Step)
		if st.Safe {
			return rep, nil
		}
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("rotation: waiting for %s: %w: %s", w.Step, ctx.Err(), st.Why)
		case <-expired:
			return rep, fmt.Errorf("rotation: %s %w after %s: %s", w.Step, ErrNotSafe, w.Timeout, st.Why)
		case <-t.C:
		}
	}
}
