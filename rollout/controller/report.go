package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons on the workload.
const (
	// EventAdopted: the workload was opted in; the baseline was recorded and
	// nothing was restarted.
	EventAdopted = "Adopted"
	// EventRebased: the workload consumes other objects or keys than before
	// (its pod template or a chain changed); the new baseline was recorded and
	// nothing was restarted.
	EventRebased = "BaselineUpdated"
	// EventStateRemoved (Warning): another writer removed the controller's
	// state annotations from a workload it had adopted; it was adopted again.
	EventStateRemoved = "StateRemoved"
	// EventRolled: consumed content changed and the pod template was stamped.
	EventRolled = "Rolled"
	// EventDeferred: a change waits for the minimum interval, the previous
	// rollout or the global budget.
	EventDeferred = "RolloutDeferred"
	// EventRefused: a required object or key is missing, or TLS content is
	// unusable: no rollout.
	EventRefused = "RolloutRefused"
	// EventWouldRoll: dry run; the rollout that would have been made.
	EventWouldRoll = "WouldRoll"
	// EventInvalidAnnotation: a hotcert.dev annotation has a malformed value.
	EventInvalidAnnotation = "InvalidAnnotation"
)

// maxNote caps an Event's message.
const maxNote = 1024

// reporter emits Events and counts decisions, once per distinct situation: a
// change deferred until the end of the interval is reported once, not at every
// reconcile until then.
type reporter struct {
	rec     record.EventRecorder
	metrics *metrics

	mu      sync.Mutex
	last    map[string]string // workload key -> signature of the last reported situation
	pending map[string]string // workload key -> kind, of workloads with a deferred change
}

func newReporter(rec record.EventRecorder, m *metrics) *reporter {
	return &reporter{rec: rec, metrics: m, last: map[string]string{}, pending: map[string]string{}}
}

// report emits an Event and counts a decision, unless sig is what was last
// reported for key (sig "" always reports).
func (r *reporter) report(obj client.Object, kind, key, sig, result, reason, eventType, eventReason, note string) {
	r.mu.Lock()
	if sig != "" && r.last[key] == sig {
		r.mu.Unlock()
		return
	}
	r.last[key] = sig
	if result == ResultDeferred {
		if _, ok := r.pending[key]; !ok {
			r.pending[key] = kind
			r.metrics.pending.WithLabelValues(kind).Inc()
		}
	} else {
		r.clearPendingLocked(key)
	}
	r.mu.Unlock()

	if result != "" {
		r.metrics.rollouts.WithLabelValues(kind, result, reason).Inc()
	}
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	r.rec.Event(obj, eventType, eventReason, note)
}

// settled forgets the last situation of key: nothing is pending any more.
func (r *reporter) settled(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
	r.clearPendingLocked(key)
}

func (r *reporter) clearPendingLocked(key string) {
	if kind, ok := r.pending[key]; ok {
		delete(r.pending, key)
		r.metrics.pending.WithLabelValues(kind).Dec()
	}
}

func (r *reporter) warnAnnotation(obj client.Object, key string, err error) {
	r.mu.Lock()
	sig := "annotation/" + err.Error()
	if r.last[key+"#annotation"] == sig {
		r.mu.Unlock()
		return
	}
	r.last[key+"#annotation"] = sig
	r.mu.Unlock()
	r.rec.Eventf(obj, corev1.EventTypeWarning, EventInvalidAnnotation, "%s; using the default", err)
}

func (r *reporter) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
	delete(r.last, key+"#annotation")
	r.clearPendingLocked(key)
}
