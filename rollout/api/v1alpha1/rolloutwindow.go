package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RolloutWindow is one span of time in which the rollout controller may roll
// the workloads a ReferenceRule reaches (ReferenceRuleSpec.RolloutWindows):
// recurring (Schedule and Duration) or explicit (Start and End).
type RolloutWindow struct {
	// Schedule is five cron fields or a descriptor, optionally prefixed by
	// CRON_TZ=<IANA zone> ("CRON_TZ=Europe/Berlin 0 2 * * SAT").
	Schedule string `json:"schedule,omitempty"`
	// Duration is how long each window lasts ("4h"), elapsed time.
	Duration string `json:"duration,omitempty"`
	// Start and End bound an explicit window.
	Start *metav1.Time `json:"start,omitempty"`
	End   *metav1.Time `json:"end,omitempty"`
}

// String is w in the text form of the hotcert.dev/rollout-windows
// annotation.
func (w RolloutWindow) String() string {
	if w.Schedule != "" {
		return w.Schedule + " for " + w.Duration
	}
	var start, end string
	if w.Start != nil {
		start = w.Start.UTC().Format(time.RFC3339)
	}
	if w.End != nil {
		end = w.End.UTC().Format(time.RFC3339)
	}
	return start + "/" + end
}

// copyRolloutWindows deep-copies in.
func copyRolloutWindows(in []RolloutWindow) []RolloutWindow {
	if in == nil {
		return nil
	}
	out := make([]RolloutWindow, len(in))
	for i, w := range in {
		out[i] = w
		out[i].Start, out[i].End = w.Start.DeepCopy(), w.End.DeepCopy()
	}
	return out
}
