package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/chain"
)

// reconciler rolls the workloads of one kind. It is level-triggered: every
// decision is made from the workload as it is now, the content it consumes as it
// is now, and the state recorded in the workload's annotations, so a missed
// event, a restart or a leader change loses nothing.
type reconciler struct {
	kind     workloadKind
	client   client.Client // reads from the cache, writes to the API server
	api      client.Reader // uncached reads
	store    *store
	shared   *shared
	report   *reporter
	opts     Options
	hashOpts []rollout.HashOption
	// live follows ReferenceRules (nil when off); namespaces are the ones the
	// controller watches (empty: all).
	live       *chain.Live
	namespaces []string

	mu           sync.Mutex
	waitingSince map[string]time.Time     // when a change first waited for the previous rollout
	dryBaseline  map[string]rollout.State // dry-run baselines of workloads never adopted
	adopted      map[string]types.UID     // workloads this process adopted
	removals     map[string]removals      // workloads whose state another writer removed
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
	budget *rollout.Budget
	cache  client.Reader
	// onLookup, for tests, sees every object a reconcile resolves (nil when
	// the object is missing).
	onLookup func(workload string, k objKey, o *rollout.Object)

	seedMu sync.Mutex
	seeded bool
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
	for _, k := range workloadKinds {
		list := k.newList()
		if err := s.cache.List(ctx, list); err != nil {
			return fmt.Errorf("seeding the rollout budget: %w", err)
		}
		eachObject(list, func(o client.Object) {
			if optedIn(o) || hasState(o) {
				s.budget.Observe(workloadKey(k.name, o), rollout.StateOf(o.GetAnnotations()).LastRollout, now)
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

func (r *reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	obj := r.kind.newObj()
	if err := r.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(r.kind.name + "/" + req.Namespace + "/" + req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	key := workloadKey(r.kind.name, obj)
	var cons *chain.Consumption
	if r.live != nil {
		var err error
		if cons, err = r.live.Consumed(r.kind.name, obj.GetNamespace(), obj.GetName()); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !(optedIn(obj) || cons != nil) || obj.GetDeletionTimestamp() != nil {
		r.forget(key)
		if hasState(obj) && obj.GetDeletionTimestamp() == nil && !r.opts.DryRun {
			if r.live != nil && !r.live.Ready() {
				// The chains are not known yet: it may be a workload a
				// ReferenceRule reaches. Live enqueues every workload of its
				// graph once it is ready.
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, r.clearState(ctx, obj)
		}
		return reconcile.Result{}, nil
	}

	tmpl := rollout.PodTemplate(obj)
	if len(tmpl.Spec.Containers) == 0 {
		// Cached as metadata only: a workload a ReferenceRule reaches, not
		// adopted yet (once adopted, the cache keeps its spec). Read it.
		obj = r.kind.newObj()
		if err := r.api.Get(ctx, req.NamespacedName, obj); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		tmpl = rollout.PodTemplate(obj)
	}
	refs := rollout.PodSpecRefs(&tmpl.Spec)
	var chainProblems []rollout.Problem
	if cons != nil {
		refs, chainProblems = r.chainRefs(obj.GetNamespace(), refs, cons)
	}
	lookup := r.store.lookup(ctx, obj.GetNamespace())
	if hook := r.shared.onLookup; hook != nil {
		inner := lookup
		lookup = func(kind rollout.Kind, name string) (*rollout.Object, error) {
			o, err := inner(kind, name)
			ns, n := rollout.SplitName(obj.GetNamespace(), name)
			hook(key, objKey{kind, ns, n}, o)
			return o, err
		}
	}
	cfg, err := rollout.Compute(obj.GetNamespace(), refs, lookup, r.hashOpts...)
	if err != nil {
		return reconcile.Result{}, err
	}
	ann := obj.GetAnnotations()
	interval, err := rollout.MinInterval(ann, r.opts.MinInterval)
	if err != nil {
		r.report.warnAnnotation(obj, key, err)
	}
	state := rollout.StateOf(ann)
	dry := r.opts.DryRun || rollout.IsTrue(ann, rollout.AnnotationDryRun)
	now := r.opts.Clock.Now().UTC().Truncate(time.Millisecond)
	r.shared.budget.Observe(key, state.LastRollout, now)

	// Never roll, nor adopt, into a missing Secret, ConfigMap, key or link of
	// a chain of custom resources.
	if missing := slices.Concat(chainProblems, cfg.Missing); len(missing) > 0 {
		r.refuse(obj, key, cfg, missing, state.Adopted())
		return reconcile.Result{}, nil
	}

	if !state.Adopted() || !state.Comparable(cfg) {
		if dry {
			state = r.dryRunBaseline(key, state, cfg)
		} else {
			// Adoption: record what the running pods consume, touch no pod
			// template, restart nothing.
			removed := !state.Adopted() && r.wasAdopted(key, obj.GetUID())
			if removed {
				if wait := r.removedAgain(key, now); wait > 0 {
					return reconcile.Result{RequeueAfter: wait}, nil
				}
			}
			if err := r.writeState(ctx, obj, state.Applied(cfg)); err != nil {
				return reconcile.Result{}, err
			}
			if removed {
				// Someone else removed the recorded state: most likely an
				// owner controller that writes the workload's annotations as
				// it wants them. Every removal costs a write, and a change
				// that lands in between is taken as the baseline.
				r.report.report(obj, r.kind.name, key, "", ResultAdopted, ReasonStateRemoved, corev1.EventTypeWarning, EventStateRemoved,
					fmt.Sprintf("another writer removed hotcert's annotations (%s); recorded config hash %s again as the baseline, nothing restarted (if it goes on, re-adoptions back off up to %s). If an owner controller rewrites this workload's annotations, deploy the controller's admission webhook (--webhook-bind-address), which keeps them", rollout.AnnotationAppliedHash, short(cfg.Hash), maxRemovalBackoff))
			} else {
				r.report.report(obj, r.kind.name, key, "", ResultAdopted, ReasonOptedIn, corev1.EventTypeNormal, EventAdopted,
					fmt.Sprintf("recorded config hash %s of %s as the baseline; nothing restarted", short(cfg.Hash), describeRefs(refs)))
			}
			r.markAdopted(key, obj.GetUID())
			r.report.settled(key)
			logger.V(1).Info("adopted", "hash", cfg.Hash)
			return reconcile.Result{}, nil
		}
	}

	changes := state.Changes(cfg)
	if len(changes) == 0 {
		r.settled(key)
		if state.AppliedHash != cfg.Hash && !dry {
			// The pod template, or a chain of custom resources, now references
			// other objects or keys: that is the owner's change, which rolls the
			// workload by itself if its pods must see it (and a rule added or
			// edited must not restart everything). Record the new baseline, no
			// stamp.
			if err := r.writeState(ctx, obj, state.Applied(cfg)); err != nil {
				return reconcile.Result{}, err
			}
			r.report.report(obj, r.kind.name, key, "", ResultAdopted, ReasonReferencesChanged, corev1.EventTypeNormal, EventRebased,
				fmt.Sprintf("now consumes %s; recorded config hash %s as the new baseline, nothing restarted", describeRefs(refs), short(cfg.Hash)))
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, nil
	}
	what := rollout.Describe(changes, 8)

	if len(cfg.Invalid) > 0 {
		r.refuse(obj, key, cfg, cfg.Invalid, true)
		return reconcile.Result{}, nil
	}
	if dry {
		r.report.report(obj, r.kind.name, key, "dry/"+cfg.Hash, ResultDryRun, ReasonConfigChanged, corev1.EventTypeNormal, EventWouldRoll,
			"would roll: "+what)
		return reconcile.Result{}, nil
	}

	// Rate control, all of it derived from the API: the last rollout time from
	// the workload's annotation, the previous rollout's progress from its
	// status. A deferral is a RequeueAfter, never an in-memory timer.
	if next := state.NextRollout(interval, now); !next.IsZero() {
		r.report.report(obj, r.kind.name, key, "interval/"+next.String(), ResultDeferred, ReasonMinInterval, corev1.EventTypeNormal, EventDeferred,
			fmt.Sprintf("%s; rolling at %s, %s after the last rollout (minimum interval)", what, next.Format(time.RFC3339), interval))
		return reconcile.Result{RequeueAfter: next.Sub(now)}, nil
	}
	if p := rollout.ProgressOf(obj); !p.Done {
		since := r.waitStart(key, now)
		if deadline := since.Add(r.opts.RolloutWaitTimeout); now.Before(deadline) {
			r.report.report(obj, r.kind.name, key, "progress", ResultDeferred, ReasonInProgress, corev1.EventTypeNormal, EventDeferred,
				fmt.Sprintf("%s; waiting for the previous rollout to finish (%s), at most until %s", what, p.Detail, deadline.Format(time.RFC3339)))
			return reconcile.Result{RequeueAfter: deadline.Sub(now)}, nil
		}
		logger.Info("previous rollout still in progress after the wait timeout; rolling anyway", "progress", p.Detail)
	}
	if err := r.shared.seedBudget(ctx, now); err != nil {
		return reconcile.Result{}, err
	}
	if retry := r.shared.budget.Take(key, now); !retry.IsZero() {
		r.report.report(obj, r.kind.name, key, "budget", ResultDeferred, ReasonBudget, corev1.EventTypeNormal, EventDeferred,
			fmt.Sprintf("%s; global rollout budget spent (%d per %s), retrying at %s", what, r.opts.MaxRollouts, r.opts.BudgetWindow, retry.Format(time.RFC3339)))
		return reconcile.Result{RequeueAfter: retry.Sub(now) + 10*time.Millisecond}, nil
	}

	// Roll: stamp the pod template and record the state in one write,
	// conditional on the version the decision was made on.
	orig := obj.DeepCopyObject().(client.Object)
	rollout.Stamp(rollout.PodTemplate(obj), cfg.Hash)
	setAnnotations(obj, state.Rolled(cfg, now).Annotations())
	if err := r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(rollout.FieldManager)); err != nil {
		r.shared.budget.Release(key, now)
		return reconcile.Result{}, err
	}
	r.settled(key)
	r.report.report(obj, r.kind.name, key, "", ResultRolled, ReasonConfigChanged, corev1.EventTypeNormal, EventRolled,
		fmt.Sprintf("rolled: %s (config hash %s)", what, short(cfg.Hash)))
	r.report.settled(key)
	logger.Info("rolled", "changes", what, "hash", cfg.Hash)
	return reconcile.Result{}, nil
}

// refuse reports why the workload is not rolled (or not adopted).
func (r *reconciler) refuse(obj client.Object, key string, cfg *rollout.Config, problems []rollout.Problem, adopted bool) {
	var parts []string
	for _, p := range problems {
		if s := p.String(); !slices.Contains(parts, s) { // a pair's problem is reported on both keys
			parts = append(parts, s)
		}
	}
	verb := "not rolling"
	if !adopted {
		verb = "not adopting"
	}
	note := fmt.Sprintf("%s: %s; the running pods keep their current configuration", verb, strings.Join(parts, "; "))
	r.report.report(obj, r.kind.name, key, "refused/"+cfg.Hash+"/"+note, ResultRefused, problems[0].Reason, corev1.EventTypeWarning, EventRefused, note)
}

func (r *reconciler) writeState(ctx context.Context, obj client.Object, s rollout.State) error {
	orig := obj.DeepCopyObject().(client.Object)
	setAnnotations(obj, s.Annotations())
	return r.client.Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(rollout.FieldManager))
}

// clearState removes the recorded state of a workload that opted out, so that
// opting in again adopts afresh. The pod template is left alone: removing the
// stamp would roll the workload.
func (r *reconciler) clearState(ctx context.Context, obj client.Object) error {
	orig := obj.DeepCopyObject().(client.Object)
	a := obj.GetAnnotations()
	for _, k := range stateKeys {
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

func (r *reconciler) dryRunBaseline(key string, recorded rollout.State, cfg *rollout.Config) rollout.State {
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
		names = append(names, string(r.Kind)+" "+rollout.DisplayName(r.Name))
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
