package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/budget"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
	"github.com/hotcert/hotcert/rollout/internal/naming"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// reconciler rolls the workloads of one kind. It is level-triggered: every
// decision is made from the workload as it is now, the content it consumes as it
// is now, and the state recorded in the workload's annotations, so a missed
// event, a restart or a leader change loses nothing.
type reconciler struct {
	kind     workloadKind
	client   client.Client // reads from the cache, writes to the API server
	api      client.Reader // uncached reads
	store    *clusterview.Store
	shared   *shared
	report   *reporter
	opts     Options
	hashOpts []rollout.HashOption
	// live follows ReferenceRules (nil when off); namespaces are the ones the
	// controller watches (empty: all).
	live       *referencerules.Live
	namespaces []string

	mu           sync.Mutex
	waitingSince map[string]time.Time   // when a change first waited for the previous rollout
	dryBaseline  map[string]state.State // dry-run baselines of workloads never adopted
	adopted      map[string]types.UID   // workloads this process adopted
	removals     map[string]removals    // workloads whose state another writer removed
}

// removals counts how often another writer removed a workload's recorded
// state, to back off instead of fighting it.
type removals struct {
	n    int
	last time.Time
}

// Re-adoptions after another writer removed the state back off from
// removalBackoff, doubling, up to maxRemovalBackoff: an owner controller that
// reconciles on every change of its Deployment would otherwise answer each
// re-adoption with a removal, in a tight loop of writes.
const (
	removalBackoff    = time.Second
	maxRemovalBackoff = 5 * time.Minute
)

// shared is the state the three kinds' reconcilers share.
type shared struct {
	budget *budget.Budget
	cache  client.Reader
	// kinds returns every workload kind rolled now: the built-in ones and
	// those ReferenceRules declare.
	kinds func() []workloadKind
	// onLookup, for tests, sees every object a reconcile resolves (nil when
	// the object is missing).
	onLookup func(workload string, k clusterview.Key, o *rollout.Object)

	seedMu sync.Mutex
	seeded bool
}

// lookup reads the Secrets and ConfigMaps of namespace from st for the
// workload key, through the onLookup hook when a test set one.
func (s *shared) lookup(ctx context.Context, st *clusterview.Store, namespace, key string) rollout.Lookup {
	lookup := st.Lookup(ctx, namespace)
	hook := s.onLookup
	if hook == nil {
		return lookup
	}
	return func(kind rollout.Kind, name string) (*rollout.Object, error) {
		o, err := lookup(kind, name)
		ns, n := naming.Split(namespace, name)
		hook(key, clusterview.Key{Kind: kind, Namespace: ns, Name: n}, o)
		return o, err
	}
}

// seedBudget counts, once, the rollouts recorded in every opted-in workload's
// annotations against the budget, so that a new leader inherits the budget its
// predecessor spent.
func (s *shared) seedBudget(ctx context.Context, now time.Time) error {
	s.seedMu.Lock()
	defer s.seedMu.Unlock()
	if s.seeded {
		return nil
	}
	for _, k := range s.kinds() {
		list := k.newList()
		if err := s.cache.List(ctx, list); err != nil {
			return fmt.Errorf("seeding the rollout budget: %w", err)
		}
		eachObject(list, func(o client.Object) {
			if optedIn(o) || hasState(o) {
				s.budget.Observe(workloadKey(k.name, o), state.Of(o.GetAnnotations()).LastRollout, now)
			}
		})
	}
	s.seeded = true
	return nil
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if err != nil {
		if apierrors.IsConflict(err) {
			// Someone wrote the workload since the cache saw it: decide again on
			// the new version (its event is on its way too).
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		r.report.metrics.errors.WithLabelValues(r.kind.name).Inc()
	}
	return res, err
}

// workload is one reconcile's view of a managed workload: what it consumes
// now and what its annotations record.
type workload struct {
	obj      client.Object
	tmpl     *corev1.PodTemplateSpec // obj's pod template (a copy for a declared kind)
	key      string
	refs     rollout.Refs
	cfg      *rollout.Config
	recorded state.State
	// problems are the chains' missing links and out-of-scope objects.
	problems []rollout.Problem
	interval time.Duration
	dry      bool
	now      time.Time
	// rotate is a rotate-now token not yet honoured ("" for none).
	rotate string
	// override says why the change rolls outside its rollout windows ("" when
	// inside, or without windows); windowNote adds the schedule to a dry
	// run's Event.
	override   string
	windowNote string
}

// reconcile decides, in named steps, what to do with one workload: load it,
// resolve what it consumes, then refuse (a required object or key is missing),
// adopt (record the baseline), rebase (it now consumes other objects or keys),
// refuse (unusable TLS), defer (not yet valid TLS, trust guard, minimum interval, previous
// rollout, budget) or roll. Each step that fails says which it was.
func (r *reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	w, cons, err := r.load(ctx, req)
	if w == nil || err != nil {
		return reconcile.Result{}, err
	}
	if err := r.resolve(ctx, w, cons); err != nil {
		return reconcile.Result{}, fmt.Errorf("resolving what %s consumes: %w", w.key, err)
	}

	// Never roll, nor adopt, into a missing Secret, ConfigMap, key or link of
	// a chain of custom resources.
	if missing := slices.Concat(w.problems, w.cfg.Missing); len(missing) > 0 {
		r.refuse(w, missing)
		return reconcile.Result{}, nil
	}
	if !w.recorded.Adopted() || !w.recorded.Comparable(w.cfg) {
		if !w.dry {
			res, err := r.adopt(ctx, w)
			return res, wrapStep("adopting", w, err)
		}
		w.recorded = r.dryRunBaseline(w.key, w.recorded, w.cfg)
	}
	if err := r.recordIgnored(ctx, w); err != nil {
		return reconcile.Result{}, wrapStep("recording the ignored changes of", w, err)
	}
	changes := w.recorded.Changes(w.cfg)
	w.rotate = rotateRequest(w)
	if len(changes) == 0 && w.rotate == "" {
		return reconcile.Result{}, wrapStep("recording the new baseline of", w, r.rebase(ctx, w))
	}
	what := state.Describe(changes, 8)
	if w.rotate != "" {
		what = fmt.Sprintf("rotate-now requested (%s=%q)", rollout.AnnotationRotateNow, w.rotate)
		if len(changes) > 0 {
			what += ", with " + state.Describe(changes, 8)
		}
	}
	r.trackWaiting(w, false)
	if len(w.cfg.Invalid) > 0 {
		r.refuse(w, w.cfg.Invalid)
		return reconcile.Result{}, nil
	}
	if early := pending(w.cfg.NotYetValid, w.now); len(early) > 0 {
		return r.deferUntilValid(w, what, early), nil
	}
	if conflicts, err := r.trustGuard(ctx, w); err != nil || len(conflicts) > 0 {
		if err != nil {
			return reconcile.Result{}, wrapStep("checking the trust guard of", w, err)
		}
		return r.deferUntilTrusted(w, what, conflicts), nil
	}
	if w.rotate == "" {
		if res, deferred, err := r.awaitWindow(ctx, w, cons, what); deferred || err != nil {
			return res, wrapStep("checking the rollout windows of", w, err)
		}
	}
	if w.dry {
		r.report.report(w.obj, r.kind.name, w.key, outcome{
			sig: "dry/" + w.cfg.Hash + "/" + w.rotate, result: resultDryRun, reason: reasonConfigChanged, event: eventWouldRoll,
			note: "would roll: " + what + w.windowNote,
		})
		return reconcile.Result{}, nil
	}
	if res, deferred, err := r.deferRollout(ctx, w, what); deferred || err != nil {
		return res, wrapStep("checking the rollout's timing of", w, err)
	}
	return reconcile.Result{}, wrapStep("rolling", w, r.roll(ctx, w, what))
}

func wrapStep(step string, w *workload, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", step, w.key, err)
}

// load reads the workload req names. It returns nil when the workload is gone
// or not managed (neither opted in nor reached by a ReferenceRule's chain),
// after forgetting it and removing the state it records.
func (r *reconciler) load(ctx context.Context, req reconcile.Request) (*workload, *referencerules.Consumption, error) {
	obj := r.kind.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(r.kind.name + "/" + req.Namespace + "/" + req.Name)
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("reading %s %s: %w", r.kind.name, req.NamespacedName, err)
	}
	key := workloadKey(r.kind.name, obj)
	if r.kind.declared != nil && !r.kind.declared() {
		// No ReferenceRule in use declares the kind any more: leave the
		// object as it is.
		r.forget(key)
		return nil, nil, nil
	}
	var cons *referencerules.Consumption
	if r.live != nil {
		var err error
		if cons, err = r.live.Consumed(r.kind.name, obj.GetNamespace(), obj.GetName()); err != nil {
			return nil, nil, fmt.Errorf("following the ReferenceRules to %s: %w", key, err)
		}
	}
	if !(optedIn(obj) || cons != nil) || obj.GetDeletionTimestamp() != nil {
		r.forget(key)
		if hasState(obj) && obj.GetDeletionTimestamp() == nil && !r.opts.DryRun {
			if r.live != nil && !r.live.Ready() {
				// The chains are not known yet: it may be a workload a
				// ReferenceRule reaches. Live enqueues every workload of its
				// graph once it is ready.
				return nil, nil, nil
			}
			if err := r.clearState(ctx, obj); err != nil {
				return nil, nil, fmt.Errorf("removing the recorded state of %s: %w", key, err)
			}
		}
		return nil, nil, nil
	}
	if r.kind.stripped(obj) {
		// Cached as metadata only: a workload a ReferenceRule reaches, not
		// adopted yet (once adopted, the cache keeps its spec). Read it.
		obj = r.kind.newObj()
		if err := r.api.Get(ctx, req.NamespacedName, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil, nil
			}
			return nil, nil, fmt.Errorf("reading %s: %w", key, err)
		}
	}
	tmpl, err := r.kind.template(obj)
	if err != nil {
		// A declared kind whose rule names a pod template the object does
		// not have: say so on the object, roll nothing.
		r.report.report(obj, r.kind.name, key, outcome{
			sig: "template/" + err.Error(), result: resultRefused, reason: reasonNoPodTemplate, event: eventRefused, warning: true,
			note: "not rolling: " + err.Error() + "; the running pods keep their current configuration",
		})
		return nil, nil, nil
	}
	return &workload{obj: obj, key: key, tmpl: tmpl}, cons, nil
}

// resolve computes what w consumes (its pod spec, and the chains that reach
// it) and reads its recorded state and annotations.
func (r *reconciler) resolve(ctx context.Context, w *workload, cons *referencerules.Consumption) error {
	obj := w.obj
	w.refs = rollout.PodSpecRefs(&w.tmpl.Spec)
	if cons != nil {
		w.refs, w.problems = r.chainRefs(obj.GetNamespace(), w.refs, cons)
	}
	lookup := r.shared.lookup(ctx, r.store, obj.GetNamespace(), w.key)
	cfg, err := rollout.Compute(obj.GetNamespace(), w.refs, lookup, r.hashOpts...)
	if err != nil {
		return err
	}
	w.cfg = cfg
	ann := obj.GetAnnotations()
	if w.interval, err = state.MinInterval(ann, r.opts.MinInterval); err != nil {
		r.report.warnAnnotation(obj, w.key, err)
	}
	w.recorded = state.Of(ann)
	w.dry = r.opts.DryRun || state.IsTrue(ann, rollout.AnnotationDryRun)
	w.now = r.opts.Clock.Now().UTC().Truncate(time.Millisecond)
	r.shared.budget.Observe(w.key, w.recorded.LastRollout, w.now)
	return nil
}

// adopt records what the running pods consume as the baseline: it touches no
// pod template and restarts nothing.
func (r *reconciler) adopt(ctx context.Context, w *workload) (reconcile.Result, error) {
	removed := !w.recorded.Adopted() && r.wasAdopted(w.key, w.obj.GetUID())
	if removed {
		if wait := r.removedAgain(w.key, w.now); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	if err := r.writeState(ctx, w.obj, w.recorded.Applied(w.cfg)); err != nil {
		return reconcile.Result{}, err
	}
	if removed {
		// Someone else removed the recorded state: most likely an owner
		// controller that writes the workload's annotations as it wants them.
		// Every removal costs a write, and a change that lands in between is
		// taken as the baseline.
		r.report.report(w.obj, r.kind.name, w.key, outcome{
			result: resultAdopted, reason: reasonStateRemoved, event: eventStateRemoved, warning: true,
			note: fmt.Sprintf("another writer removed hotcert's annotations (%s); recorded config hash %s again as the baseline, nothing restarted (if it goes on, re-adoptions back off up to %s). If an owner controller rewrites this workload's annotations, deploy the controller's admission webhook, which keeps them", rollout.AnnotationAppliedHash, short(w.cfg.Hash), maxRemovalBackoff),
		})
	} else {
		r.report.report(w.obj, r.kind.name, w.key, outcome{
			result: resultAdopted, reason: reasonOptedIn, event: eventAdopted,
			note: fmt.Sprintf("recorded config hash %s of %s as the baseline; nothing restarted", short(w.cfg.Hash), describeRefs(w.refs)),
		})
	}
	r.markAdopted(w.key, w.obj.GetUID())
	r.report.settled(w.key)
	log.FromContext(ctx).V(1).Info("adopted", "hash", w.cfg.Hash)
	return reconcile.Result{}, nil
}

// rebase handles a workload without content changes: when its pod template,
// or a chain of custom resources, now references other objects or keys, that
// is the owner's change, which rolls the workload by itself if its pods must
// see it (and a rule added or edited must not restart everything): the new
// baseline is recorded, no stamp.
func (r *reconciler) rebase(ctx context.Context, w *workload) error {
	r.settled(w.key)
	if w.dry {
		return nil
	}
	if w.recorded.AppliedHash == w.cfg.Hash {
		// Nothing waits any more (a change reverted); the running
		// certificate's validity is recorded once for a workload adopted
		// before it was.
		_, pending := w.obj.GetAnnotations()[rollout.AnnotationRolloutPending]
		if !pending && (!w.recorded.Running.IsZero() || w.cfg.Leaf.IsZero()) {
			return nil
		}
		next := w.recorded
		if next.Running.IsZero() {
			next.Running = w.cfg.Leaf
		}
		kv := next.Annotations()
		kv[rollout.AnnotationRolloutPending] = ""
		return r.writeAnnotations(ctx, w.obj, kv)
	}
	kv := w.recorded.Applied(w.cfg).Annotations()
	kv[rollout.AnnotationRolloutPending] = ""
	if err := r.writeAnnotations(ctx, w.obj, kv); err != nil {
		return err
	}
	r.report.report(w.obj, r.kind.name, w.key, outcome{
		result: resultAdopted, reason: reasonReferencesChanged, event: eventRebased,
		note: fmt.Sprintf("now consumes %s; recorded config hash %s as the new baseline, nothing restarted", describeRefs(w.refs), short(w.cfg.Hash)),
	})
	return nil
}

// pending returns the problems of content not valid yet at now.
func pending(notYetValid []rollout.Problem, now time.Time) []rollout.Problem {
	var out []rollout.Problem
	for _, p := range notYetValid {
		if now.Before(p.NotBefore) {
			out = append(out, p)
		}
	}
	return out
}

// deferUntilValid defers a change onto certificates that are not valid yet:
// the pods' reloaders would refuse them, so the workload rolls when the last
// of them becomes valid (there is no clock-skew tolerance), and the Event says
// so.
func (r *reconciler) deferUntilValid(w *workload, what string, early []rollout.Problem) reconcile.Result {
	until := early[0].NotBefore
	var parts []string
	for _, p := range early {
		if p.NotBefore.After(until) {
			until = p.NotBefore
		}
		if s := p.String(); !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	r.report.report(w.obj, r.kind.name, w.key, outcome{
		sig: "notbefore/" + w.cfg.Hash, result: resultDeferred, reason: reason(rollout.ReasonNotYetValid), event: eventDeferred,
		note: fmt.Sprintf("%s; waiting for the certificate's NotBefore, rolling at %s: %s", what, until.UTC().Format(time.RFC3339), strings.Join(parts, "; ")),
	})
	return reconcile.Result{RequeueAfter: until.Sub(w.now)}
}

// deferRollout applies rate control, all of it derived from the API: the last
// rollout time from the workload's annotation, the previous rollout's progress
// from its status. A deferral is a RequeueAfter, never an in-memory timer.
func (r *reconciler) deferRollout(ctx context.Context, w *workload, what string) (reconcile.Result, bool, error) {
	if next := w.recorded.NextRollout(w.interval, w.now); !next.IsZero() && w.rotate == "" {
		r.report.report(w.obj, r.kind.name, w.key, outcome{
			sig: "interval/" + next.String(), result: resultDeferred, reason: reasonMinInterval, event: eventDeferred,
			note: fmt.Sprintf("%s; rolling at %s, %s after the last rollout (minimum interval)", what, next.Format(time.RFC3339), w.interval),
		})
		return reconcile.Result{RequeueAfter: next.Sub(w.now)}, true, nil
	}
	if p := r.kind.progress(w.obj); !p.Done {
		since := r.waitStart(w.key, w.now)
		if deadline := since.Add(r.opts.RolloutWaitTimeout); w.now.Before(deadline) {
			r.report.report(w.obj, r.kind.name, w.key, outcome{
				sig: "progress", result: resultDeferred, reason: reasonInProgress, event: eventDeferred,
				note: fmt.Sprintf("%s; waiting for the previous rollout to finish (%s), at most until %s", what, p.Detail, deadline.Format(time.RFC3339)),
			})
			return reconcile.Result{RequeueAfter: deadline.Sub(w.now)}, true, nil
		}
		log.FromContext(ctx).Info("previous rollout still in progress after the wait timeout; rolling anyway", "progress", p.Detail)
	}
	if err := r.shared.seedBudget(ctx, w.now); err != nil {
		return reconcile.Result{}, false, err
	}
	if retry := r.shared.budget.Take(w.key, w.now); !retry.IsZero() {
		r.report.report(w.obj, r.kind.name, w.key, outcome{
			sig: "budget", result: resultDeferred, reason: reasonBudget, event: eventDeferred,
			note: fmt.Sprintf("%s; global rollout budget spent (%d per %s), retrying at %s", what, r.opts.MaxRollouts, r.opts.BudgetWindow, retry.Format(time.RFC3339)),
		})
		return reconcile.Result{RequeueAfter: retry.Sub(w.now) + 10*time.Millisecond}, true, nil
	}
	return reconcile.Result{}, false, nil
}

// roll stamps the pod template and records the state in one write,
// conditional on the version the decision was made on. The budget taken for
// it is given back if the write fails.
func (r *reconciler) roll(ctx context.Context, w *workload, what string) error {
	obj := w.obj
	orig := obj.DeepCopyObject().(client.Object)
	stamp := w.cfg.Hash
	next := w.recorded.Rolled(w.cfg, w.now)
	if w.rotate != "" {
		stamp, next.Rotated = rotateStamp(w.cfg.Hash, w.rotate), w.rotate
	}
	if err := r.kind.roll(obj, stamp, w.now); err != nil {
		r.shared.budget.Release(w.key, w.now)
		return err
	}
	setAnnotations(obj, next.Annotations())
	setAnnotations(obj, map[string]string{rollout.AnnotationRolloutPending: ""})
	opts := []client.PatchOption{client.FieldOwner(rollout.FieldManager)}
	if r.kind.held != nil {
		// A declared kind's rule names the field written: one the kind's
		// schema does not have is refused, not pruned in silence.
		opts = append(opts, client.FieldValidation(metav1.FieldValidationStrict))
	}
	err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), opts...)
	if r.kind.held != nil {
		err = r.kind.held(obj, stamp, w.now, err)
	}
	if err != nil {
		r.shared.budget.Release(w.key, w.now)
		if notKept := (*referencerules.NotKeptError)(nil); errors.As(err, &notKept) {
			r.notKept(ctx, w, what, notKept)
			return nil
		}
		return err
	}
	r.settled(w.key)
	why, note := reasonConfigChanged, ""
	switch {
	case w.rotate != "":
		why = reasonRotateNow
	case w.override != "":
		note = "; outside the rollout windows: " + w.override
		r.report.metrics.overrides.WithLabelValues(r.kind.name, string(reasonExpiryMargin)).Inc()
	}
	r.report.report(obj, r.kind.name, w.key, outcome{
		result: resultRolled, reason: why, event: eventRolled,
		note: fmt.Sprintf("rolled: %s (config hash %s)%s", what, short(w.cfg.Hash), note),
	})
	log.FromContext(ctx).Info("rolled", "changes", what, "hash", w.cfg.Hash)
	return nil
}

// notKept reports a rollout the API server did not keep: the field the
// declared kind's rule writes is not in its schema. Nothing rolled; the same
// change is not tried again until the rule, the object or what it consumes
// changes.
func (r *reconciler) notKept(ctx context.Context, w *workload, what string, err *referencerules.NotKeptError) {
	r.report.report(w.obj, r.kind.name, w.key, outcome{
		sig: "notkept/" + w.cfg.Hash + "/" + err.Path, result: resultRefused, reason: reasonFieldPruned, event: eventRefused, warning: true,
		note: fmt.Sprintf("not rolled: %s; %v; fix the rule's rollout.restartAt (or the kind's CRD); the running pods keep their current configuration", what, err),
	})
	log.FromContext(ctx).Error(err, "not rolled: the API server does not keep the field the rollout writes", "changes", what, "field", err.Path, "rule", err.Rule)
}

// refuse reports why the workload is not rolled (or not adopted).
func (r *reconciler) refuse(w *workload, problems []rollout.Problem) {
	var parts []string
	for _, p := range problems {
		if s := p.String(); !slices.Contains(parts, s) { // a pair's problem is reported on both keys
			parts = append(parts, s)
		}
	}
	verb := "not rolling"
	if !w.recorded.Adopted() {
		verb = "not adopting"
	}
	note := fmt.Sprintf("%s: %s; the running pods keep their current configuration", verb, strings.Join(parts, "; "))
	r.report.report(w.obj, r.kind.name, w.key, outcome{
		sig: "refused/" + w.cfg.Hash + "/" + note, result: resultRefused, reason: reason(problems[0].Reason), event: eventRefused, warning: true,
		note: note,
	})
}

func (r *reconciler) writeState(ctx context.Context, obj client.Object, s state.State) error {
	return r.writeAnnotations(ctx, obj, s.Annotations())
}

// writeAnnotations sets (or, for "", removes) the annotations kv of obj,
// conditional on the version read.
func (r *reconciler) writeAnnotations(ctx context.Context, obj client.Object, kv map[string]string) error {
	orig := obj.DeepCopyObject().(client.Object)
	setAnnotations(obj, kv)
	return r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(rollout.FieldManager))
}

// clearState removes the recorded state of a workload that opted out, so that
// opting in again adopts afresh. The pod template is left alone: removing the
// stamp would roll the workload.
func (r *reconciler) clearState(ctx context.Context, obj client.Object) error {
	orig := obj.DeepCopyObject().(client.Object)
	a := obj.GetAnnotations()
	for _, k := range slices.Concat(stateKeys, scheduleKeys) {
		delete(a, k)
	}
	obj.SetAnnotations(a)
	return r.client.Patch(ctx, obj, client.MergeFrom(orig), client.FieldOwner(rollout.FieldManager))
}

func setAnnotations(obj client.Object, kv map[string]string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range kv {
		if v == "" {
			delete(a, k)
		} else {
			a[k] = v
		}
	}
	obj.SetAnnotations(a)
}

func (r *reconciler) dryRunBaseline(key string, recorded state.State, cfg *rollout.Config) state.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.dryBaseline[key]; ok && s.Comparable(cfg) {
		return s
	}
	s := recorded.Applied(cfg)
	r.dryBaseline[key] = s
	return s
}

func (r *reconciler) waitStart(key string, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.waitingSince[key]; ok {
		return t
	}
	r.waitingSince[key] = now
	return now
}

// settled forgets the in-memory bookkeeping of a change once it is applied or
// gone.
func (r *reconciler) settled(key string) {
	r.mu.Lock()
	delete(r.waitingSince, key)
	r.mu.Unlock()
	r.report.settled(key)
}

// removedAgain records that the workload's state was removed at now and
// returns how long to wait before adopting it again (0: now).
func (r *reconciler) removedAgain(key string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removals == nil {
		r.removals = map[string]removals{}
	}
	rec := r.removals[key]
	if rec.n > 0 {
		backoff := min(removalBackoff<<min(rec.n-1, 20), maxRemovalBackoff)
		if next := rec.last.Add(backoff); now.Before(next) {
			return next.Sub(now)
		}
	}
	r.removals[key] = removals{n: rec.n + 1, last: now}
	return 0
}

// markAdopted remembers that this process adopted the workload key (uid).
func (r *reconciler) markAdopted(key string, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.adopted == nil {
		r.adopted = map[string]types.UID{}
	}
	r.adopted[key] = uid
}

// wasAdopted reports whether this process adopted the workload key (uid) and
// has not forgotten it since (an opt-out or a deletion forgets).
func (r *reconciler) wasAdopted(key string, uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.adopted[key] == uid
}

func (r *reconciler) forget(key string) {
	r.mu.Lock()
	delete(r.waitingSince, key)
	delete(r.dryBaseline, key)
	delete(r.adopted, key)
	delete(r.removals, key)
	r.mu.Unlock()
	r.report.forget(key)
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

func describeRefs(refs rollout.Refs) string {
	if len(refs) == 0 {
		return "no Secret or ConfigMap"
	}
	names := make([]string, 0, len(refs))
	for i, r := range refs {
		if i == 6 {
			names = append(names, fmt.Sprintf("and %d more", len(refs)-i))
			break
		}
		names = append(names, string(r.Kind)+" "+naming.Display(r.Name))
	}
	return strings.Join(names, ", ")
}

func eachObject(list client.ObjectList, f func(client.Object)) {
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if co, ok := o.(client.Object); ok {
			f(co)
		}
		return nil
	})
}
