package census

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// reconcile takes one TrustRotation's census, in named steps: read the
// rotation, load its CAs, read and date its objects, find the pods that
// consume them, gather the evidence, judge, write the status.
func (c *Census) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	tr := &v1alpha1.TrustRotation{}
	if err := c.cache.Get(ctx, req.NamespacedName, tr); err != nil {
		if apierrors.IsNotFound(err) {
			c.metrics.forget(req.Name)
			c.triggers.follow(req.Name, nil)
			c.mu.Lock()
			delete(c.last, req.Name)
			delete(c.seenPCRs, req.Name)
			c.mu.Unlock()
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("census: reading TrustRotation %s: %w", req.Name, err)
	}
	if wait := c.spacing(tr); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	now := c.opts.Clock.Now()
	status, res, err := c.take(ctx, tr, now)
	if err != nil {
		c.metrics.errors.WithLabelValues(tr.Name).Inc()
		return reconcile.Result{}, err
	}
	d := c.drive(ctx, tr, status, res, now) // mode Drive: the next move (drive.go)
	if err := c.write(ctx, tr, status); apierrors.IsConflict(err) {
		// The rotation changed since the cache's copy (or the cache has not
		// seen the census's own last write yet): not a failed census, but
		// one to take again, on the copy the cache holds by then.
		return reconcile.Result{RequeueAfter: c.opts.MinSpacing}, nil
	} else if err != nil {
		c.metrics.errors.WithLabelValues(tr.Name).Inc()
		return reconcile.Result{}, err
	}
	c.emit(tr, d.events)
	if d.again > 0 && d.again < c.opts.Interval {
		return reconcile.Result{RequeueAfter: max(d.again, c.opts.MinSpacing)}, nil
	}
	return reconcile.Result{RequeueAfter: c.opts.Interval}, nil
}

// spacing is how long to wait before the next census of tr (0: take it
// now): pod events are coalesced into one census per MinSpacing; a changed
// spec is taken at once. It is measured in real time, as the work queue's
// RequeueAfter is, never on Options.Clock: a clock that a test holds still
// (or that jumps) must not hold every census back.
func (c *Census) spacing(tr *v1alpha1.TrustRotation) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	last, ok := c.last[tr.Name]
	if ok && tr.Status.ObservedGeneration == tr.Generation {
		if wait := last.Add(c.opts.MinSpacing).Sub(now); wait > 0 {
			return wait
		}
	}
	c.last[tr.Name] = now
	return 0
}

// take takes the census of tr at now and returns its new status. A spec
// that cannot be acted on (a CA that does not load) is a status, Invalid on
// every step, not an error; an API error reading the cache is an error.
func (c *Census) take(ctx context.Context, tr *v1alpha1.TrustRotation, now time.Time) (*v1alpha1.TrustRotationStatus, *core.Result, error) {
	spec := &tr.Spec
	st := &v1alpha1.TrustRotationStatus{ObservedGeneration: tr.Generation}
	oldCA, err := loadCA(ctx, c.api, spec.OldCA, "old")
	if err == nil {
		var newCA side
		if newCA, err = loadCA(ctx, c.api, spec.NewCA, "new"); err == nil {
			return c.census(ctx, tr, oldCA, newCA, now)
		}
	}
	msg := "the rotation cannot be judged: " + err.Error()
	st.Summary = msg
	st.Conditions = tr.Status.Conditions
	for _, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
		st.Conditions = setCondition(st.Conditions, step, false, v1alpha1.ReasonInvalid, msg, tr.Generation, now)
	}
	c.revocationInvalid(tr, st, msg, now)
	return st, nil, nil
}

func (c *Census) census(ctx context.Context, tr *v1alpha1.TrustRotation, oldCA, newCA side, now time.Time) (*v1alpha1.TrustRotationStatus, *core.Result, error) {
	spec := &tr.Spec
	sc, err := c.scopeNow(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("census: %s: %w", tr.Name, err)
	}
	trustNames, states := trustObjects(ctx, c.api, spec.Trust, oldCA, newCA)
	serverNames, signers, servers := serverObjects(ctx, c.api, spec.ServerCertificates, oldCA, newCA)
	states, servers = sc.restrict(states, spec.Trust), sc.restrict(servers, spec.Trust)
	read := slices.Concat(states, servers)
	if slices.ContainsFunc(signers, func(s string) bool { return s != "" }) {
		read = append(read, core.State{}) // pod certificates: pods of every namespace
	}
	if err := c.feed.follow(ctx, sc); err != nil {
		return nil, nil, fmt.Errorf("census: %s: %w", tr.Name, err)
	}
	listed := listPods(c.pods, read, sc)
	states = append(states, projectedSelections(ctx, c.api, states, listed, oldCA, newCA)...)
	servers = append(servers, podCertificates(ctx, c.api, spec.ServerCertificates, listed, oldCA, newCA, c.pcrSeen(tr.Name), now)...)
	st := &v1alpha1.TrustRotationStatus{ObservedGeneration: tr.Generation}
	st.Trust = core.TrackTrust(trustNames, tr.Status.Trust, states, now)
	st.ServerCertificates = core.TrackServers(serverNames, signers, tr.Status.ServerCertificates, servers, now)
	states = append(states, servers...)
	c.triggers.follow(tr.Name, triggersOf(spec, states))
	objects := make([]core.Object, len(states))
	for i, s := range states {
		objects[i] = s.Object
	}
	in := core.Input{
		OldCA: oldCA.CA, NewCA: newCA.CA, Objects: states,
		VolumeDelay: durationOr(spec.Propagation.Volume, DefaultVolumeDelay), CTBDelay: durationOr(spec.Propagation.ClusterTrustBundle, DefaultCTBDelay),
		Acknowledged: acknowledged(spec.Acknowledged), MinConsumers: int(spec.MinConsumers),
		// A driven rotation names every consumer that reads at start (readAtStart).
		KeepConsumers: c.drives(tr) && c.opts.Drive,
	}
	// The pods are judged judgeBatch at a time, in the order of their
	// namespaces and names: a census holds one batch's consumers, not
	// every pod's.
	slices.SortFunc(listed, func(a, b *podRecord) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	t := core.Begin(in)
	g := &gatherer{c: c, tr: tr, cache: c.cache, oldCA: oldCA, newCA: newCA, states: states}
	reportErr := ""
	var revoking []core.Pod // every batch's pods, for spec.revocation only
	for batch := range slices.Chunk(listed, judgeBatch) {
		g.consumers(batch, objects, in.KeepConsumers || spec.Revocation != nil)
		reports, err := g.reports(ctx)
		if err != "" {
			reportErr = err
		}
		t.Add(g.pods, reports, g.served(ctx))
		if spec.Revocation != nil {
			revoking = append(revoking, g.pods...)
		}
	}
	r := t.Result()
	c.metrics.observe(tr.Name, r)
	st.Next, st.Summary = r.Next, r.Summary
	if sc.desc != "" {
		st.Summary += " (counting the pods of " + sc.desc + " only)"
	}
	if reportErr != "" {
		st.Summary += " (reports could not be read: " + reportErr + ")"
		log.FromContext(ctx).Info("census: reports could not be read", "rotation", tr.Name, "error", reportErr)
	}
	st.Consumers, st.Stragglers, st.StragglersOmitted = r.Counts, r.Stragglers, int32(r.Omitted)
	st.Conditions = r.Conditions(tr.Status.Conditions, tr.Generation, now)
	c.revoke(ctx, tr, st, states, revoking, []side{oldCA, newCA}, now) // spec.revocation (revocation.go)
	return st, &r, nil
}

// judgeBatch is how many pods a census judges at a time.
const judgeBatch = 250

// acknowledged turns spec.acknowledged into the census's question.
func acknowledged(acks []v1alpha1.Acknowledgement) func(core.Pod) string {
	type ack struct {
		ns     string
		sel    labels.Selector
		reason string
	}
	var list []ack
	for _, a := range acks {
		sel := labels.Everything()
		if a.Selector != nil {
			s, err := metav1.LabelSelectorAsSelector(a.Selector)
			if err != nil {
				continue // acknowledges nothing
			}
			sel = s
		}
		list = append(list, ack{a.Namespace, sel, a.Reason})
	}
	return func(p core.Pod) string {
		for _, a := range list {
			if a.ns == p.Namespace && a.sel.Matches(labels.Set(p.Labels)) {
				return a.reason
			}
		}
		return ""
	}
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// eventType is the type of an Event about a step.
func eventType(done bool) string {
	if done {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// pcrSeen is when the census of rotation first saw each issued
// PodCertificateRequest (reconciles are sequential: the map is used by one at
// a time).
func (c *Census) pcrSeen(rotation string) map[types.UID]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.seenPCRs[rotation]
	if m == nil {
		m = map[types.UID]time.Time{}
		c.seenPCRs[rotation] = m
	}
	return m
}
