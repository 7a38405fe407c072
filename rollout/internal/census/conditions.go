package census

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxMessage bounds a condition's message (the API allows 32768 bytes).
const maxMessage = 4096

// Conditions returns conds with one condition per step of r set (True once
// the step is done), for generation gen: a condition whose status does not
// change keeps its last transition time.
func (r Result) Conditions(conds []metav1.Condition, gen int64, now time.Time) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	for _, s := range r.Steps {
		status := metav1.ConditionFalse
		if s.Done {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&out, metav1.Condition{Type: s.Name, Status: status, Reason: s.Reason,
			Message: truncate(s.Message, maxMessage), ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
	}
	return out
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = " …"
	cut := n - len(more)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + more
}
