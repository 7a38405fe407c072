package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

const (
	// eventIgnored: a consumed object's exception annotation
	// (hotcert.dev/ignore-keys, hotcert.dev/ignore) kept a change from
	// rolling the workload, or started or stopped ignoring a key.
	eventIgnored eventReason = "ChangeIgnored"
	// resultIgnored counts changes of ignored content in
	// <prefix>_rollouts_total (reason ignored_key or ignored_object).
	resultIgnored        result = "ignored"
	reasonIgnoredKey     reason = "ignored_key"
	reasonIgnoredObject  reason = "ignored_object"
	maxIgnoredInOneEvent        = 8
)

// recordIgnored handles what the exception annotations of the consumed
// objects account for: a change of ignored content, or an annotation added or
// removed. None of them rolls anything; each is recorded in the workload's
// state (so the next reconcile, on this replica or another, does not report
// it again) and said once in a Normal Event. Malformed annotations are
// reported as such and except nothing.
func (r *reconciler) recordIgnored(ctx context.Context, w *workload) error {
	for _, p := range w.cfg.Malformed {
		r.report.warnAnnotation(w.obj, w.key, errors.New(p.Detail))
	}
	ign := w.recorded.Ignored(w.cfg)
	if len(ign) == 0 {
		return nil
	}
	next := w.recorded.WithIgnored(w.cfg)
	if w.dry {
		r.mu.Lock()
		if _, ok := r.dryBaseline[w.key]; ok {
			r.dryBaseline[w.key] = next
		}
		r.mu.Unlock()
	} else if err := r.writeState(ctx, w.obj, next); err != nil {
		return err
	}
	w.recorded = next
	var counted bool
	for _, c := range ign {
		if c.What == state.IgnoredFromNow || c.What == state.IgnoredNoLonger {
			continue
		}
		counted = true
		why := reasonIgnoredKey
		if c.Key == "" {
			why = reasonIgnoredObject
		}
		r.report.metrics.rollouts.WithLabelValues(r.kind.name, string(resultIgnored), string(why)).Inc()
	}
	note := state.Describe(ign, maxIgnoredInOneEvent)
	if counted {
		note = "not rolling: " + note
	}
	note += fmt.Sprintf(" (%s or %s on the consumed object); nothing restarted", rollout.AnnotationIgnoreKeys, rollout.AnnotationIgnore)
	if strings.Contains(note, state.IgnoredNoLonger) {
		note += "; what counts again is taken as applied as it is now: a change made while it was ignored reaches the pods at their next rollout"
	}
	r.report.rec.Event(w.obj, corev1.EventTypeNormal, string(eventIgnored), truncateNote(note))
	return nil
}

func truncateNote(note string) string {
	if len(note) > maxNote {
		return note[:maxNote-3] + "..."
	}
	return note
}
