package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
	"github.com/hotcert/hotcert/rollout/internal/window"
)

// DefaultExpiryMargin is the share of a leaf certificate's lifetime before
// its NotAfter at which a change waiting for a rollout window rolls anyway:
// one sixth (4h of a 24-hour certificate, 15 days of a 90-day one). It is
// below the third that cert-manager renews at by default, so that a renewal
// still waits for a window, and leaves a sixth of the lifetime for the
// rollout, and a person, to finish before the old certificate expires.
const DefaultExpiryMargin = 1.0 / 6

// Reasons of a window's decisions (the metrics' reason label).
const (
	// reasonOutsideWindow: a change waits for the next rollout window.
	reasonOutsideWindow reason = "outside_window"
	// reasonExpiryMargin: a change rolled outside the windows because the
	// certificate the pods run reached its expiry margin.
	reasonExpiryMargin reason = "expiry_margin"
	// reasonRotateNow: a rotate-now token rolled the workload.
	reasonRotateNow reason = "rotate_now"
)

// Events of windows (docs/rollout-controller.md lists them).
const (
	// eventWindowOverridden (Warning): a change rolls outside the rollout
	// windows, because the certificate the pods run reached its expiry
	// margin.
	eventWindowOverridden eventReason = "WindowOverridden"
)

var namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")

// schedule is when a pending change of a workload may roll: its windows (and
// where they are declared), and the deadline the running certificate sets.
type schedule struct {
	windows window.Set
	source  string // where the windows are declared, for the Events
	invalid error  // a malformed declaration: no window opens until it is fixed
	// open and closes: whether a window is open now, until when.
	open   bool
	closes time.Time
	// next is the next window's start (zero: none).
	next time.Time
	// running is the leaf the pods run; deadline is its NotAfter minus the
	// margin (zero when unknown).
	running  rollout.Validity
	margin   time.Duration
	deadline time.Time
}

// rollAt returns when the change rolls: now (open, or overridden by the
// deadline), or the earlier of the next window's start and the deadline (zero:
// no time is known; an event will bring the workload back).
func (s schedule) rollAt(now time.Time) (at time.Time, override bool) {
	if s.open && s.invalid == nil {
		return now, false
	}
	if !s.deadline.IsZero() && !now.Before(s.deadline) {
		return now, true
	}
	at = s.next
	if s.invalid != nil {
		at = time.Time{}
	}
	if !s.deadline.IsZero() && (at.IsZero() || s.deadline.Before(at)) {
		at = s.deadline
	}
	return at, false
}

// describe says when a deferred change rolls and why, for Events.
func (s schedule) describe(at time.Time) string {
	var b strings.Builder
	if s.invalid != nil {
		fmt.Fprintf(&b, "the rollout windows (%s) cannot be read: %v; no window opens until they are fixed", s.source, s.invalid)
	} else {
		fmt.Fprintf(&b, "outside the rollout windows (%s: %s)", s.source, s.windows)
		if s.next.IsZero() {
			b.WriteString("; no window opens again")
		} else {
			fmt.Fprintf(&b, "; next window at %s", s.next.UTC().Format(time.RFC3339))
		}
	}
	if s.deadline.IsZero() {
		b.WriteString("; the expiry of the certificate the pods run is unknown, so nothing overrides the windows")
	} else {
		fmt.Fprintf(&b, "; the certificate the pods run expires at %s, its expiry margin (%s) is reached at %s", s.running.NotAfter.UTC().Format(time.RFC3339), s.margin.Round(time.Second), s.deadline.UTC().Format(time.RFC3339))
	}
	if !at.IsZero() {
		fmt.Fprintf(&b, "; rolling at %s", at.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// schedule computes w's schedule at w.now: its windows (the workload's
// annotation, else a ReferenceRule's, else its Namespace's annotation) and
// the running certificate's deadline.
func (r *reconciler) schedule(ctx context.Context, w *workload, cons *referencerules.Consumption) (schedule, error) {
	s := schedule{running: w.recorded.Running}
	s.margin, s.deadline = r.deadline(w)
	text, source, err := r.windowsText(ctx, w, cons)
	if err != nil {
		return s, err
	}
	s.source = source
	if s.windows, s.invalid = window.Parse(text); s.invalid != nil {
		r.report.warnAnnotation(w.obj, w.key, s.invalid)
	}
	s.open, s.closes = s.windows.Open(w.now)
	if !s.open {
		s.next = s.windows.Next(w.now)
	}
	return s, nil
}

// windowsText returns the windows that apply to w and where they are
// declared: the workload's annotation (which can say "always"), a
// ReferenceRule's spec.rolloutWindows, the Namespace's annotation; "" for
// none.
func (r *reconciler) windowsText(ctx context.Context, w *workload, cons *referencerules.Consumption) (string, string, error) {
	if v, ok := w.obj.GetAnnotations()[rollout.AnnotationRolloutWindows]; ok {
		return v, "annotation " + rollout.AnnotationRolloutWindows + " of the workload", nil
	}
	if r.live != nil {
		gk := w.obj.GetObjectKind().GroupVersionKind().GroupKind()
		var via []string
		if cons != nil {
			via = cons.Via
		}
		if text, rule := r.live.Windows(gk.Group+"/"+gk.Kind, r.kind.declared != nil, via); rule != "" {
			return text, "ReferenceRule " + rule, nil
		}
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(namespaceGVK)
	if err := r.api.Get(ctx, types.NamespacedName{Name: w.obj.GetNamespace()}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", nil
		}
		// Forbidden too is an error: rolling as if the namespace had no
		// windows would restart it when its owners said not to.
		return "", "", fmt.Errorf("reading the rollout windows of namespace %s: %w", w.obj.GetNamespace(), err)
	}
	if v, ok := ns.GetAnnotations()[rollout.AnnotationRolloutWindows]; ok {
		return v, "annotation " + rollout.AnnotationRolloutWindows + " of Namespace " + w.obj.GetNamespace(), nil
	}
	return "", "", nil
}

// deadline returns the expiry margin of the certificate w's pods run and
// when it is reached (zeros when the certificate is unknown).
func (r *reconciler) deadline(w *workload) (time.Duration, time.Time) {
	v := w.recorded.Running
	if v.IsZero() {
		return 0, time.Time{}
	}
	m := r.expiryMargin(w, v)
	return m, v.NotAfter.Add(-m)
}

// trackWaiting records that w's change waits (window: for a rollout window),
// with its deadline, for the metrics; the next outcome that is not a
// deferral forgets it.
func (r *reconciler) trackWaiting(w *workload, window bool) {
	_, d := r.deadline(w)
	r.report.metrics.waiting.set(w.key, waitingChange{kind: r.kind.name, window: window, deadline: d})
}

// awaitWindow defers w's change while no rollout window is open, unless the
// certificate its pods run has reached its expiry margin: then the change
// rolls now (w.override says why) and a Warning Event says the window was
// overridden. A deferral requeues at the next window's start or the
// deadline, whichever comes first, and is recorded on the workload
// (hotcert.dev/rollout-pending), so that it is visible, and its start kept,
// across controller restarts; nothing else about it lives in memory.
func (r *reconciler) awaitWindow(ctx context.Context, w *workload, cons *referencerules.Consumption, what string) (reconcile.Result, bool, error) {
	s, err := r.schedule(ctx, w, cons)
	if err != nil {
		return reconcile.Result{}, false, err
	}
	if len(s.windows) == 0 && s.invalid == nil {
		return reconcile.Result{}, false, r.clearPending(ctx, w)
	}
	at, override := s.rollAt(w.now)
	if at.Equal(w.now) {
		if override {
			w.override = fmt.Sprintf("the certificate the pods run expires at %s; its expiry margin (%s) was reached at %s", s.running.NotAfter.UTC().Format(time.RFC3339), s.margin.Round(time.Second), s.deadline.UTC().Format(time.RFC3339))
			w.windowNote = "; outside the rollout windows: " + w.override
			if !w.dry && r.report.first(w.key, "override", w.cfg.Hash+"/"+s.deadline.String()) {
				r.report.rec.Eventf(w.obj, corev1.EventTypeWarning, string(eventWindowOverridden), "%s; rolling now, outside the rollout windows (%s: %s): %s", what, s.source, s.windows, w.override)
			}
		} else {
			w.windowNote = fmt.Sprintf("; inside the rollout window (%s: %s) until %s", s.source, s.windows, s.closes.UTC().Format(time.RFC3339))
		}
		return reconcile.Result{}, false, nil
	}
	res := reconcile.Result{}
	if !at.IsZero() {
		res.RequeueAfter = at.Sub(w.now)
	}
	if w.dry {
		r.report.report(w.obj, r.kind.name, w.key, outcome{
			sig: "dry/window/" + w.cfg.Hash + "/" + at.String(), result: resultDryRun, reason: reasonOutsideWindow, event: eventWouldRoll,
			note: fmt.Sprintf("would defer (%s): %s; %s", reasonOutsideWindow, what, s.describe(at)),
		})
		return res, true, nil
	}
	r.report.report(w.obj, r.kind.name, w.key, outcome{
		sig: "window/" + w.cfg.Hash + "/" + at.String(), result: resultDeferred, reason: reasonOutsideWindow, event: eventDeferred,
		note: fmt.Sprintf("%s; deferred (%s): %s", what, reasonOutsideWindow, s.describe(at)),
	})
	r.trackWaiting(w, true)
	cur := w.obj.GetAnnotations()[rollout.AnnotationRolloutPending]
	since := pendingSince(cur)
	if since.IsZero() {
		since = w.now
	}
	if v := pendingValue(since, at, s); v != cur {
		if err := r.writeAnnotations(ctx, w.obj, map[string]string{rollout.AnnotationRolloutPending: v}); err != nil {
			return reconcile.Result{}, false, err
		}
	}
	return res, true, nil
}

// clearPending removes hotcert.dev/rollout-pending from w when it is there
// (its change is no longer waiting for a window).
func (r *reconciler) clearPending(ctx context.Context, w *workload) error {
	if _, ok := w.obj.GetAnnotations()[rollout.AnnotationRolloutPending]; !ok || w.dry {
		return nil
	}
	return r.writeAnnotations(ctx, w.obj, map[string]string{rollout.AnnotationRolloutPending: ""})
}

// expiryMargin is how long before v's NotAfter a pending change rolls
// whatever the windows say: the workload's hotcert.dev/expiry-margin (a
// percentage of the lifetime, or a duration), else Options.ExpiryMargin of
// the lifetime.
func (r *reconciler) expiryMargin(w *workload, v rollout.Validity) time.Duration {
	share := r.opts.ExpiryMargin
	if text, ok := w.obj.GetAnnotations()[rollout.AnnotationExpiryMargin]; ok {
		d, f, err := parseMargin(text)
		switch {
		case err != nil:
			r.report.warnAnnotation(w.obj, w.key, err)
		case d > 0:
			return d
		default:
			share = f
		}
	}
	return time.Duration(float64(v.Lifetime()) * share)
}

// parseMargin reads hotcert.dev/expiry-margin: "25%" (a share, returned in
// f) or a Go duration.
func parseMargin(text string) (d time.Duration, f float64, err error) {
	text = strings.TrimSpace(text)
	if p, ok := strings.CutSuffix(text, "%"); ok {
		v, perr := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if perr == nil && v > 0 && v < 100 {
			return 0, v / 100, nil
		}
	} else if v, derr := time.ParseDuration(text); derr == nil && v > 0 {
		return v, 0, nil
	}
	return 0, 0, fmt.Errorf("annotation %s=%q is not a share of the certificate's lifetime like 25%% nor a duration like 6h", rollout.AnnotationExpiryMargin, text)
}

// rotateRequest returns w's rotate-now token when it is one not yet
// honoured ("" otherwise).
func rotateRequest(w *workload) string {
	token := strings.TrimSpace(w.obj.GetAnnotations()[rollout.AnnotationRotateNow])
	if token == "" || token == w.recorded.Rotated {
		return ""
	}
	return token
}

// rotateStamp is the stamp of a rotate-now rollout: the config hash and a
// digest of the token, so that the pod template changes (and the workload
// restarts) even when the consumed content did not.
func rotateStamp(hash, token string) string {
	sum := sha256.Sum256([]byte(token))
	return hash + "+r" + hex.EncodeToString(sum[:4])
}

// pendingValue is the hotcert.dev/rollout-pending annotation of a change
// deferred since since, rolling at at.
func pendingValue(since, at time.Time, s schedule) string {
	v := "since=" + since.UTC().Format(time.RFC3339)
	if !at.IsZero() {
		v += "; rolls-at=" + at.UTC().Format(time.RFC3339)
	}
	if !s.deadline.IsZero() {
		v += "; deadline=" + s.deadline.UTC().Format(time.RFC3339)
	}
	return v + "; reason=" + string(reasonOutsideWindow)
}

// pendingSince reads the since= of a hotcert.dev/rollout-pending value (zero
// when absent or unreadable).
func pendingSince(v string) time.Time {
	for part := range strings.SplitSeq(v, ";") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(part), "since="); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}
