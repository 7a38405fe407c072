package controller

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// report emits an Event and counts the decision o about the workload obj (of
// kind, key), unless o.sig is what was last reported for key.
func (r *reporter) report(obj client.Object, kind, key string, o outcome) {
	r.mu.Lock()
	if o.sig != "" && r.last[key] == o.sig {
		r.mu.Unlock()
		return
	}
	r.last[key] = o.sig
	if o.result == resultDeferred {
		if _, ok := r.pending[key]; !ok {
			r.pending[key] = kind
			r.metrics.pending.WithLabelValues(kind).Inc()
		}
	} else {
		r.clearPendingLocked(key)
	}
	r.mu.Unlock()

	if o.result != "" {
		r.metrics.rollouts.WithLabelValues(kind, string(o.result), string(o.reason)).Inc()
	}
	note := o.note
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	eventType := corev1.EventTypeNormal
	if o.warning {
		eventType = corev1.EventTypeWarning
	}
	r.rec.Event(obj, eventType, string(o.event), note)
}

// settled forgets the last situation of key: nothing is pending any more.
func (r *reporter) settled(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
	r.clearPendingLocked(key)
}

func (r *reporter) clearPendingLocked(key string) {
	r.metrics.waiting.clear(key)
	if kind, ok := r.pending[key]; ok {
		delete(r.pending, key)
		r.metrics.pending.WithLabelValues(kind).Dec()
	}
}

// first reports whether sig is new for key's side situation what (and
// records it): an Event about it is emitted once, not at every reconcile.
func (r *reporter) first(key, what, sig string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last[key+"#"+what] == sig {
		return false
	}
	r.last[key+"#"+what] = sig
	return true
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
	r.rec.Eventf(obj, corev1.EventTypeWarning, string(eventInvalidAnnotation), "%s; using the default", err)
}

func (r *reporter) forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
	delete(r.last, key+"#annotation")
	delete(r.last, key+"#override")
	r.clearPendingLocked(key)
}
