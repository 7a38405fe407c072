// Package window reads rollout windows: the times a workload may be rolled
// in. A window is recurring (a cron schedule, in a time zone, and a duration)
// or explicit (an RFC 3339 start and end). The schedules are parsed by
// robfig/cron's standard parser; time zones come from the system's zoneinfo
// (time.LoadLocation), named by a CRON_TZ= or TZ= prefix.
//
// The text form, used by the annotations, is a list separated by ";":
//
//	CRON_TZ=Europe/Berlin 0 2 * * SAT for 4h
//	2026-12-27T22:00:00Z/2026-12-28T02:00:00Z
//
// A recurring window's duration is elapsed time: a window that starts at 01:30
// for 2h on the night clocks go forward ends at 04:30 local time, and when
// the local start time does not exist that night (02:30 in Europe/Berlin on
// the last Sunday of March), robfig/cron skips it: there is no window that
// night, the next is the following one; when it exists twice (02:30 on
// the last Sunday of October), the window opens at each. Schedule windows at times that exist every
// night (not between 02:00 and 03:00 in most of Europe and North America).
package window

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Always is the text of "no restriction": a workload's annotation with this
// value lifts a window its namespace or a ReferenceRule declares.
const Always = "always"

// parser reads standard five-field schedules and descriptors (@daily), with
// an optional CRON_TZ= or TZ= prefix.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// maxWindow bounds a recurring window's duration: a week is the longest a
// maintenance window sensibly lasts, and it bounds the search in Open.
const maxWindow = 7 * 24 * time.Hour

// Window is one span of time, recurring or explicit.
type Window struct {
	text       string
	schedule   cron.Schedule // nil for an explicit window
	duration   time.Duration
	start, end time.Time
}

// Set is the union of windows. The empty Set is always open.
type Set []Window

// Recurring returns the window that opens at every activation of schedule
// (five cron fields, optionally prefixed by CRON_TZ=zone) for duration.
func Recurring(schedule string, duration time.Duration) (Window, error) {
	schedule = strings.TrimSpace(schedule)
	if strings.HasPrefix(schedule, "@every") {
		return Window{}, fmt.Errorf("window: schedule %q: @every has no fixed start; use five cron fields", schedule)
	}
	s, err := parser.Parse(schedule)
	if err != nil {
		return Window{}, fmt.Errorf("window: schedule %q: %w", schedule, err)
	}
	if duration <= 0 || duration > maxWindow {
		return Window{}, fmt.Errorf("window: schedule %q: duration %s must be positive and at most %s", schedule, duration, maxWindow)
	}
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return Window{}, fmt.Errorf("window: schedule %q never fires", schedule)
	}
	return Window{text: schedule + " for " + duration.String(), schedule: s, duration: duration}, nil
}

// Explicit returns the window [start, end).
func Explicit(start, end time.Time) (Window, error) {
	if !end.After(start) {
		return Window{}, fmt.Errorf("window: %s/%s: the end is not after the start", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return Window{text: start.Format(time.RFC3339) + "/" + end.Format(time.RFC3339), start: start, end: end}, nil
}

// Parse reads the text form (see the package doc). "" and Always give the
// empty Set.
func Parse(text string) (Set, error) {
	text = strings.TrimSpace(text)
	if text == "" || strings.EqualFold(text, Always) {
		return nil, nil
	}
	var out Set
	for item := range strings.SplitSeq(text, ";") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		w, err := parseOne(item)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		return nil, errors.New("window: no window in " + fmt.Sprintf("%q", text))
	}
	return out, nil
}

func parseOne(item string) (Window, error) {
	if i := strings.LastIndex(item, " for "); i >= 0 {
		d, err := time.ParseDuration(strings.TrimSpace(item[i+len(" for "):]))
		if err != nil {
			return Window{}, fmt.Errorf("window: %q: the duration after \"for\": %w", item, err)
		}
		return Recurring(item[:i], d)
	}
	from, to, ok := strings.Cut(item, "/")
	if !ok {
		return Window{}, fmt.Errorf("window: %q: want \"<cron schedule> for <duration>\" or \"<RFC 3339 start>/<RFC 3339 end>\"", item)
	}
	start, err := time.Parse(time.RFC3339, strings.TrimSpace(from))
	if err != nil {
		return Window{}, fmt.Errorf("window: %q: start: %w", item, err)
	}
	end, err := time.Parse(time.RFC3339, strings.TrimSpace(to))
	if err != nil {
		return Window{}, fmt.Errorf("window: %q: end: %w", item, err)
	}
	return Explicit(start, end)
}

// String is the text form of w.
func (w Window) String() string { return w.text }

// open reports whether w is open at t and, if so, when it closes.
func (w Window) open(t time.Time) (bool, time.Time) {
	if w.schedule == nil {
		return !t.Before(w.start) && t.Before(w.end), w.end
	}
	// The latest activation in (t-duration, t], if any. Next returns the
	// first activation strictly after its argument, at whole seconds.
	s := w.schedule.Next(t.Add(-w.duration))
	if s.IsZero() || s.After(t) {
		return false, time.Time{}
	}
	end := s.Add(w.duration)
	// Overlapping activations (hourly for 2h) extend the window.
	for range 10000 {
		n := w.schedule.Next(s)
		if n.IsZero() || !n.Before(end) {
			break
		}
		s, end = n, n.Add(w.duration)
	}
	return true, end
}

// next returns w's first start after t (zero when there is none).
func (w Window) next(t time.Time) time.Time {
	if w.schedule == nil {
		if w.start.After(t) {
			return w.start
		}
		return time.Time{}
	}
	return w.schedule.Next(t)
}

// Open reports whether s is open at t and, if so, when the open window
// closes (the latest close of the windows open at t). An empty Set is always
// open, and never closes (zero time).
func (s Set) Open(t time.Time) (bool, time.Time) {
	if len(s) == 0 {
		return true, time.Time{}
	}
	var open bool
	var closes time.Time
	for _, w := range s {
		if ok, end := w.open(t); ok {
			open = true
			if end.After(closes) {
				closes = end
			}
		}
	}
	return open, closes
}

// Next returns the first start of a window of s after t: zero when s is
// empty or no window starts again (explicit windows in the past).
func (s Set) Next(t time.Time) time.Time {
	var first time.Time
	for _, w := range s {
		if n := w.next(t); !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first
}

// String is the text form of s ("always" when empty).
func (s Set) String() string {
	if len(s) == 0 {
		return Always
	}
	parts := make([]string, len(s))
	for i, w := range s {
		parts[i] = w.text
	}
	return strings.Join(parts, "; ")
}
