package state

import (
	"fmt"
	"strings"
	"time"

	"github.com/hotcert/hotcert/rollout"
)

// MinInterval returns the minimum interval between two rollouts of a workload:
// its [rollout.AnnotationMinInterval] if set, else def. A malformed or negative value is
// an error, and def is returned with it.
func MinInterval(annotations map[string]string, def time.Duration) (time.Duration, error) {
	v, ok := annotations[rollout.AnnotationMinInterval]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return def, fmt.Errorf("annotation %s=%q is not a duration like 10m or 30s", rollout.AnnotationMinInterval, v)
	}
	return d, nil
}

// NextRollout returns when a workload whose state is s may roll again with
// minimum interval d: the zero time if it may roll now.
func (s State) NextRollout(d time.Duration, now time.Time) time.Time {
	if s.LastRollout.IsZero() || d <= 0 {
		return time.Time{}
	}
	next := s.LastRollout.Add(d)
	if !next.After(now) {
		return time.Time{}
	}
	return next
}

// IsTrue reports whether annotations[key] is "true" (in any case).
func IsTrue(annotations map[string]string, key string) bool {
	return strings.EqualFold(annotations[key], "true")
}
