package referencerules

import (
	"context"
	"sync/atomic"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// StatusWriter writes each ReferenceRule's Ready condition from what a Live
// made of it, so that `kubectl get referencerules` says whether the rules are
// followed and, when they are not, why. It is a manager.Runnable that runs on
// the leader only; Live, on every replica, keeps the graph.
type StatusWriter struct {
	dyn    dynamic.Interface
	logger logr.Logger
	latest atomic.Pointer[[]RuleState]
	kick   chan struct{}
}

// NewStatusWriter returns a StatusWriter of live's results, writing through
// dyn.
func NewStatusWriter(dyn dynamic.Interface, live *Live, logger logr.Logger) *StatusWriter {
	w := &StatusWriter{dyn: dyn, logger: logger, kick: make(chan struct{}, 1)}
	live.OnRules(func(states []RuleState) {
		w.latest.Store(&states)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	})
	return w
}

// NeedLeaderElection: one writer of the status.
func (w *StatusWriter) NeedLeaderElection() bool { return true }

// Start writes the status after every attempt of Live until ctx is done.
func (w *StatusWriter) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.kick:
		}
		if states := w.latest.Load(); states != nil {
			for _, st := range *states {
				if err := w.write(ctx, st); err != nil && ctx.Err() == nil {
					w.logger.Error(err, "writing the status of a ReferenceRule", "rule", st.Name)
				}
			}
		}
	}
}

// write sets the Ready condition of one rule, if that generation is still
// current and the condition differs.
func (w *StatusWriter) write(ctx context.Context, st RuleState) error {
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: st.Generation,
		Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonApplied, Message: "followed by the rollout controller"}
	if st.Err != nil {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonNotApplied
		cond.Message = st.Err.Error()
	}
	rules := w.dyn.Resource(ReferenceRules)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := rules.Get(ctx, st.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if u.GetGeneration() != st.Generation {
			return nil // a newer spec: Live reports on it next
		}
		var status v1alpha1.ReferenceRuleStatus
		if raw, ok := u.Object["status"].(map[string]any); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
				return err
			}
		}
		changed := meta.SetStatusCondition(&status.Conditions, cond)
		if st.Schema.Status != "" {
			changed = meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: v1alpha1.ConditionRolloutFieldKept, ObservedGeneration: st.Generation,
				Status: st.Schema.Status, Reason: st.Schema.Reason, Message: st.Schema.Message}) || changed
		} else {
			changed = meta.RemoveStatusCondition(&status.Conditions, v1alpha1.ConditionRolloutFieldKept) || changed
		}
		if !changed && status.ObservedGeneration == st.Generation {
			return nil
		}
		status.ObservedGeneration = st.Generation
		raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
		if err != nil {
			return err
		}
		u.Object["status"] = raw
		_, err = rules.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: rollout.FieldManager})
		return err
	})
}
