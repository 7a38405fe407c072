package census

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// Event reasons on a TrustRotation.
const (
	// EventStepDone (Normal): a step became done everywhere.
	EventStepDone = "StepDone"
	// EventStepUndone (Warning): a step that was done is no longer (a new
	// consumer on old trust, an object changed back).
	EventStepUndone = "StepUndone"
)

// write writes st as tr's status when it differs from what is there (a
// census that finds nothing new writes nothing), with an Event for each step
// whose condition changed.
func (c *Census) write(ctx context.Context, tr *v1alpha1.TrustRotation, st *v1alpha1.TrustRotationStatus) error {
	if equality.Semantic.DeepEqual(&tr.Status, st) {
		return nil
	}
	prev := tr.Status.DeepCopy()
	updated := tr.DeepCopy()
	updated.Status = *st
	if err := c.client.Status().Update(ctx, updated); err != nil {
		return fmt.Errorf("census: writing the status of TrustRotation %s: %w", tr.Name, err)
	}
	for _, cond := range st.Conditions {
		if cond.Type == v1alpha1.ConditionRevocationEnforced {
			continue // not a step: revocationEvents
		}
		was := meta.FindStatusCondition(prev.Conditions, cond.Type)
		done := cond.Status == metav1.ConditionTrue
		switch {
		case done && (was == nil || was.Status != metav1.ConditionTrue):
			c.events.Event(updated, eventType(true), EventStepDone, fmt.Sprintf("step %s done: %s", cond.Type, cond.Message))
		case !done && was != nil && was.Status == metav1.ConditionTrue:
			c.events.Event(updated, eventType(false), EventStepUndone, fmt.Sprintf("step %s no longer done: %s", cond.Type, cond.Message))
		}
	}
	c.revocationEvents(updated, prev, st)
	return nil
}

// setCondition sets one step condition.
func setCondition(conds []metav1.Condition, step string, done bool, reason, msg string, gen int64, now time.Time) []metav1.Condition {
	out := append([]metav1.Condition(nil), conds...)
	status := metav1.ConditionFalse
	if done {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&out, metav1.Condition{Type: step, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
	return out
}
