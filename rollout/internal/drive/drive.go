// Package drive decides, from a fresh census, the next move of a driven CA
// rotation: what to write (the bundle, the Certificates' issuers) and what
// the rotation's progress becomes. It is pure: the controller reads, calls
// Decide, writes what it says, then writes the status.
//
// Each step goes through three moves, one per reconcile: start (the intent
// and what a rollback needs are recorded in status before anything is
// written), write (the objects, idempotent: a repeat after a crash changes
// nothing), and done (the census proves it everywhere). The rotation never
// moves past a step the census does not prove, and never goes back to one
// it recorded done.
package drive

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// DefaultDeadlineMargin is spec.drive.deadlineMargin's default.
const DefaultDeadlineMargin = 7 * 24 * time.Hour

// MaxPlanConsumers bounds the consumers the plan names per step (the
// status stays small however large the fleet).
const MaxPlanConsumers = 20

// MaxRolls bounds the pods whose workloads one decision rolls (each costs
// the controller a few GETs; the next census takes the next ones).
const MaxRolls = 32

// Certificate is a cert-manager Certificate issuing one server certificate
// Secret.
type Certificate struct {
	// Key is "namespace/name".
	Key       string
	IssuerRef v1alpha1.IssuerRef
	Labels    map[string]string
	// Server is the index of its Secret in spec.serverCertificates.
	Server int
}

// Input is what one decision is made of.
type Input struct {
	Now        time.Time
	Generation int64
	Spec       *v1alpha1.DriveSpec
	// Census is the status the census has just computed.
	Census *v1alpha1.TrustRotationStatus
	// Prev is the progress recorded so far (nil: none).
	Prev *v1alpha1.DriveStatus
	// Bundle is the index of spec.drive.bundle in spec.trust (-1: it is not
	// there, and the rotation stops), BundleName how messages name it.
	Bundle     int
	BundleName string
	// OldCA and NewCA name the CAs; OldCAExpires is the old CA's earliest
	// NotAfter (zero: unknown).
	OldCA, NewCA string
	OldCAExpires time.Time
	// Servers name the server certificate objects as the census's
	// stragglers do, per spec.serverCertificates.
	Servers []string
	// Certificates are the cert-manager Certificates of the server
	// certificate Secrets (with reissue.certManager), in spec order;
	// Missing names the Secrets that no Certificate issues.
	Certificates []Certificate
	Missing      []string
	// ReadAtStart are the consumers that nothing reports or serves: each
	// must restart after the write of its step (and, for a trust consumer,
	// again after remove-old-ca's), or be acknowledged.
	ReadAtStart []ReadAtStart
	// RollAfter is, per step, when a consumer that restarts reads what the
	// step wrote (the census saw the write, plus the kubelet's delay): zero
	// while not known.
	RollAfter map[string]time.Time
	// Starting names the steps the census does not prove only because
	// containers have not started yet (the new pods of a roll): a done step
	// among them holds the rotation instead of stopping it.
	Starting map[string]bool
	// Failures are the handshake failures meaning "not trusted" that the
	// rotation's consumers reported since Prev.FailuresSince (nil: not
	// read, or no Prometheus to read them from).
	Failures []Failure
}

// Failure is one consumer's handshake failures of one reason.
type Failure struct {
	// Pod is "namespace/name".
	Pod, Reason string
	Count       int
}

// FailureReasons are the handshake failure reasons (the library's
// agentrpc reasons, as the agent and control plane export them) that a
// rotation's write can cause: a peer whose chain reaches no CA the
// verifier trusts, and a peer refusing ours.
var FailureReasons = []string{"unknown_authority", "peer_rejected"}

// ReadAtStart is a consumer that must restart to take a step.
type ReadAtStart struct {
	// Step is add-new-ca for a trust consumer, switch-server-cert for a
	// server.
	Step, Consumer string
	// Pod is its pod ("namespace/name"); Unproven: the census does not
	// prove it holds what the current step needs.
	Pod      string
	Unproven bool
}

// WriteKind is what a Write changes.
type WriteKind int

// Writes.
const (
	// AddNewCA: the bundle becomes its certificates and the new CA's.
	AddNewCA WriteKind = iota
	// RemoveOldCA: the bundle loses the old CA's certificates.
	RemoveOldCA
	// RemoveNewCA: the bundle loses the new CA's certificates (rollback).
	RemoveNewCA
	// SetIssuer: Certificate's issuerRef becomes IssuerRef.
	SetIssuer
)

// Write is one write the controller makes.
type Write struct {
	Kind        WriteKind
	Certificate string
	IssuerRef   v1alpha1.IssuerRef
}

// Event is an Event the controller records on the TrustRotation.
type Event struct {
	Warning         bool
	Reason, Message string
}

// Event reasons.
const (
	EventStarted    = "DriveStepStarted"
	EventWrote      = "DriveWrote"
	EventStepDone   = "DriveStepDone"
	EventStopped    = "DriveStopped"
	EventPaused     = "DrivePaused"
	EventAborted    = "DriveAborted"
	EventRolledBack = "DriveRolledBack"
	EventComplete   = "DriveComplete"
	EventDeadline   = "DriveDeadline"
	EventDryRun     = "DriveDryRun"
)

// Decision is what to do now.
type Decision struct {
	// Status is the progress to record (after Writes succeeded).
	Status *v1alpha1.DriveStatus
	// Writes are made in order; if one fails, Status is not recorded.
	Writes []Write
	Events []Event
	// Again is how soon to decide again (0: at the census's interval).
	Again time.Duration
	// Rolls are the pods ("namespace/name") whose workloads to roll for
	// Step: they read at start and are not proven to hold what it wrote.
	Rolls    []string
	RollStep string
}

// soon is how soon a decision that moved the rotation is followed by the
// next: the next move waits for a fresh census, not for the interval.
const soon = time.Millisecond

var steps = []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA}

// Decide decides the next move.
func Decide(in Input) Decision {
	st := in.Prev.DeepCopy()
	if st == nil {
		st = &v1alpha1.DriveStatus{}
	}
	d := &decider{in: in, st: st, out: Decision{Status: st}}
	d.decide()
	st.ObservedGeneration = in.Generation
	return d.out
}

type decider struct {
	in  Input
	st  *v1alpha1.DriveStatus
	out Decision
}

func (d *decider) event(warning bool, reason, format string, args ...any) {
	d.out.Events = append(d.out.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// moved marks a move: the next decision follows the next census.
func (d *decider) moved() { d.out.Again = soon }

func (d *decider) decide() {
	in, st := d.in, d.st
	st.Plan = d.plan()
	if in.Spec.DryRun {
		if st.Phase != v1alpha1.PhaseDryRun {
			d.event(false, EventDryRun, "dry run: the plan is in status.drive.plan; nothing is written")
		}
		st.Phase, st.Message = v1alpha1.PhaseDryRun, "dry run: nothing is written; the plan is in status.drive.plan"
		return
	}
	switch st.Phase {
	case v1alpha1.PhaseComplete, v1alpha1.PhaseAborted, v1alpha1.PhaseRolledBack:
		return // final
	}
	d.deadline()
	switch in.Spec.Action {
	case v1alpha1.ActionAbort:
		st.Phase, st.Message = v1alpha1.PhaseAborted, "aborted: every object is left as it is"
		d.event(true, EventAborted, "rotation aborted at %s: every object is left as it is", or(st.Step, "the start"))
		return
	case v1alpha1.ActionRollback:
		d.rollback()
		return
	case v1alpha1.ActionPause:
		if st.Phase != v1alpha1.PhasePaused {
			d.event(false, EventPaused, "rotation paused at %s", or(st.Step, "the start"))
		}
		st.Phase, st.Message = v1alpha1.PhasePaused, "paused: no step is taken and nothing is written until spec.drive.action is Run"
		return
	}
	if st.Phase == v1alpha1.PhaseStopped && st.ObservedGeneration == in.Generation {
		return // stays stopped until the spec changes
	}
	if st.Phase == v1alpha1.PhaseStopped {
		// Resumed by a spec change: failures are counted afresh.
		st.FailuresSince = now(in.Now)
	} else if why := d.failures(); why != "" {
		d.stop(why)
		return
	}
	if in.Bundle < 0 {
		d.stop(in.BundleName + " is not one of spec.trust: the census cannot prove what its consumers hold")
		return
	}
	if why := d.guard(); why != "" {
		d.stop(why)
		return
	}
	if why := d.starting(); why != "" {
		st.Phase, st.Message = v1alpha1.PhaseWaiting, why
		return
	}
	d.run()
}

// starting says why the rotation waits ("" when it need not): a step it
// proved is not proven while containers start; once they run, the census
// judges them, and the guard stops the rotation if they undo it.
func (d *decider) starting() string {
	for _, s := range d.st.Steps {
		if s.Done != nil && s.Name != v1alpha1.StepRollback && d.in.Starting[s.Name] {
			msg := "waiting for containers to start: step " + s.Name + ", done, is not proven until they run"
			if c := meta.FindStatusCondition(d.in.Census.Conditions, s.Name); c != nil {
				msg += ": " + c.Message
			}
			return msg
		}
	}
	return ""
}

// guard returns why the rotation must stop ("" when it may go on): an
// object changed underneath it, or a step it proved is no longer proven.
func (d *decider) guard() string {
	in, st := d.in, d.st
	if in.Bundle >= 0 && in.Bundle < len(in.Census.Trust) {
		b := in.Census.Trust[in.Bundle]
		if b.Error == "" && b.Objects > 0 {
			if step(st, v1alpha1.StepAddNewCA).Written != nil && b.HoldNew < b.Objects {
				return fmt.Sprintf("%s no longer holds %s, which add-new-ca wrote: someone changed the bundle underneath the rotation", in.BundleName, in.NewCA)
			}
			if step(st, v1alpha1.StepRemoveOldCA).Started == nil && b.HoldOld < b.Objects && hasStarted(st) {
				return fmt.Sprintf("%s no longer holds %s before remove-old-ca was taken: someone removed it by hand, and consumers that still present or trust only %s fail", in.BundleName, in.OldCA, in.OldCA)
			}
		}
	}
	for _, s := range st.Steps {
		if s.Done == nil || s.Name == v1alpha1.StepRollback {
			continue
		}
		if c := meta.FindStatusCondition(in.Census.Conditions, s.Name); c != nil && c.Status != metav1.ConditionTrue && c.Reason != v1alpha1.ReasonInvalid && !in.Starting[s.Name] {
			return fmt.Sprintf("step %s, done, is no longer proven: %s", s.Name, c.Message)
		}
	}
	return ""
}

// failures says why the handshake failures the consumers reported stop
// the rotation ("" when they do not).
func (d *decider) failures() string {
	in := d.in
	threshold := int32(v1alpha1.DefaultHandshakeFailureThreshold)
	if t := in.Spec.HandshakeFailureThreshold; t != nil {
		threshold = *t
	}
	if threshold <= 0 || d.st.FailuresSince == nil || len(in.Failures) == 0 {
		return ""
	}
	fs := slices.Clone(in.Failures)
	slices.SortFunc(fs, func(a, b Failure) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Pod+" "+a.Reason, b.Pod+" "+b.Reason)
	})
	total := 0
	var named []string
	for _, f := range fs {
		total += f.Count
		if len(named) < MaxPlanConsumers {
			named = append(named, fmt.Sprintf("pod %s (%d %s)", f.Pod, f.Count, f.Reason))
		}
	}
	if total < int(threshold) {
		return ""
	}
	if len(fs) > len(named) {
		named = append(named, fmt.Sprintf("and %d more", len(fs)-len(named)))
	}
	return fmt.Sprintf("%d handshake failures meaning not trusted (threshold %d) reported since %s: %s; fix them or roll back, then change the spec to resume",
		total, threshold, d.st.FailuresSince.UTC().Format(time.RFC3339), strings.Join(named, ", "))
}

func (d *decider) stop(why string) {
	if d.st.Phase != v1alpha1.PhaseStopped || d.st.Message != "stopped: "+why {
		d.event(true, EventStopped, "rotation stopped at %s: %s", or(d.st.Step, "the start"), why)
	}
	d.st.Phase, d.st.Message = v1alpha1.PhaseStopped, "stopped: "+why
}

// run takes the next move of the first step not done.
func (d *decider) run() {
	in, st := d.in, d.st
	var cur string
	for _, name := range steps {
		if step(st, name).Done == nil {
			cur = name
			break
		}
	}
	if cur == "" {
		st.Phase, st.Step, st.Message = v1alpha1.PhaseComplete, "", "rotation complete: every step proven everywhere"
		d.event(false, EventComplete, "rotation complete: %s replaced %s everywhere", in.NewCA, in.OldCA)
		return
	}
	st.Step = cur
	s := ensureStep(st, cur)
	cond := meta.FindStatusCondition(in.Census.Conditions, cur)
	if s.Started == nil {
		if cur == v1alpha1.StepSwitchServerCert && in.Spec.Reissue.CertManager != nil {
			if len(in.Missing) > 0 {
				d.stop("no cert-manager Certificate issues " + strings.Join(in.Missing, ", ") + " (spec.secretName): the controller cannot switch it")
				return
			}
			d.record()
		}
		s.Started = now(in.Now)
		st.Phase, st.Message = v1alpha1.PhaseRunning, "started "+cur
		d.event(false, EventStarted, "step %s started", cur)
		d.moved()
		return
	}
	if s.Written == nil {
		d.write(cur, s)
		return
	}
	if cond != nil && cond.Status == metav1.ConditionTrue {
		s.Done = now(in.Now)
		st.Phase, st.Message = v1alpha1.PhaseRunning, "step "+cur+" done"
		d.event(false, EventStepDone, "step %s proven everywhere: %s", cur, cond.Message)
		d.moved()
		return
	}
	st.Phase = v1alpha1.PhaseWaiting
	st.Message = "waiting for the census to prove " + cur
	if cond != nil {
		st.Message += ": " + cond.Message
	}
	d.rolls(cur)
}

// rolls names the pods to roll for step cur: those that read at start and
// are unproven, once a restart reads what the step wrote.
func (d *decider) rolls(cur string) {
	in := d.in
	after, ok := in.RollAfter[cur]
	if !ok || after.IsZero() {
		return
	}
	if left := after.Sub(in.Now); left > 0 {
		d.out.Again = left
		return
	}
	want := cur
	if cur == v1alpha1.StepRemoveOldCA {
		want = v1alpha1.StepAddNewCA // the trust consumers
	}
	for _, r := range in.ReadAtStart {
		if r.Step == want && r.Unproven && !slices.Contains(d.out.Rolls, r.Pod) && len(d.out.Rolls) < MaxRolls {
			d.out.Rolls = append(d.out.Rolls, r.Pod)
		}
	}
	if len(d.out.Rolls) > 0 {
		d.out.RollStep = cur
	}
}

// write makes the writes of step cur (the canary's first).
func (d *decider) write(cur string, s *v1alpha1.DriveStepStatus) {
	in, st := d.in, d.st
	switch cur {
	case v1alpha1.StepAddNewCA:
		d.out.Writes = append(d.out.Writes, Write{Kind: AddNewCA})
		d.event(false, EventWrote, "add-new-ca: %s now holds %s beside %s", in.BundleName, in.NewCA, in.OldCA)
	case v1alpha1.StepRemoveOldCA:
		d.out.Writes = append(d.out.Writes, Write{Kind: RemoveOldCA})
		d.event(false, EventWrote, "remove-old-ca: %s no longer holds %s", in.BundleName, in.OldCA)
	case v1alpha1.StepSwitchServerCert:
		cm := in.Spec.Reissue.CertManager
		if cm == nil {
			d.event(false, EventWrote, "switch-server-cert: issued by someone else; waiting for every server to serve a leaf of %s", in.NewCA)
			break
		}
		canary := d.canary()
		if len(canary) > 0 && len(canary) < len(st.Issuers) {
			if s.CanaryWritten == nil {
				d.setIssuers(true, cm.IssuerRef)
				s.CanaryWritten = now(in.Now)
				st.FailuresSince = now(in.Now)
				st.Phase, st.Message = v1alpha1.PhaseRunning, "switched the canary: "+strings.Join(canary, ", ")
				d.moved()
				return
			}
			if s.CanaryDone == nil {
				if why := d.canaryUnproven(canary); why != "" {
					st.Phase, st.Message = v1alpha1.PhaseWaiting, "waiting for the canary: "+why
					return
				}
				s.CanaryDone = now(in.Now)
				d.event(false, EventStepDone, "switch-server-cert: the canary (%s) serves leaves of %s", strings.Join(canary, ", "), in.NewCA)
			}
			if soak := durationOf(in.Spec.Canary.Soak); soak > 0 {
				if left := s.CanaryDone.Add(soak).Sub(in.Now); left > 0 {
					st.Phase, st.Message = v1alpha1.PhaseWaiting, "the canary soaks until "+s.CanaryDone.Add(soak).UTC().Format(time.RFC3339)
					d.out.Again = left
					return
				}
			}
			d.setIssuers(false, cm.IssuerRef)
		} else {
			d.setIssuers(true, cm.IssuerRef)
			d.setIssuers(false, cm.IssuerRef)
		}
	}
	s.Written = now(in.Now)
	st.FailuresSince = now(in.Now) // failures from now on may be the write's
	st.Phase, st.Message = v1alpha1.PhaseRunning, "wrote "+cur
	d.moved()
}

// setIssuers switches the recorded Certificates, the canary's or the rest.
func (d *decider) setIssuers(canary bool, to v1alpha1.IssuerRef) {
	var names []string
	for _, r := range d.st.Issuers {
		if r.Canary == canary {
			d.out.Writes = append(d.out.Writes, Write{Kind: SetIssuer, Certificate: r.Certificate, IssuerRef: to})
			names = append(names, r.Certificate)
		}
	}
	if len(names) > 0 {
		what := "the rest"
		if canary {
			what = "the canary"
			if d.in.Spec.Canary == nil {
				what = "every Certificate"
			}
		}
		d.event(false, EventWrote, "switch-server-cert: %s (%s) now issued by %s", what, strings.Join(names, ", "), issuer(to))
	}
}

// record records the Certificates' issuers, and which are the canary,
// before any is switched.
func (d *decider) record() {
	in := d.in
	c := in.Spec.Canary
	n := 0
	if c != nil && c.Percent > 0 {
		n = int(math.Ceil(float64(len(in.Certificates)) * float64(c.Percent) / 100))
	}
	var sel labels.Selector
	if c != nil && c.Selector != nil {
		if s, err := metav1.LabelSelectorAsSelector(c.Selector); err == nil {
			sel = s
		}
	}
	d.st.Issuers = nil
	for i, cert := range in.Certificates {
		canary := i < n || (sel != nil && sel.Matches(labels.Set(cert.Labels)))
		if c == nil {
			canary = true // one stage: every Certificate at once
		}
		d.st.Issuers = append(d.st.Issuers, v1alpha1.RecordedIssuer{Certificate: cert.Key, IssuerRef: cert.IssuerRef, Canary: canary})
	}
}

// canary names the canary's Certificates.
func (d *decider) canary() []string {
	if d.in.Spec.Canary == nil {
		return nil
	}
	var out []string
	for _, r := range d.st.Issuers {
		if r.Canary {
			out = append(out, r.Certificate)
		}
	}
	return out
}

// canaryUnproven says why the canary is not proven yet ("" when it is):
// each of its Secrets holds a leaf of the new CA and no consumer of them is
// a straggler of switch-server-cert.
func (d *decider) canaryUnproven(canary []string) string {
	in := d.in
	for _, cert := range in.Certificates {
		if !slices.Contains(canary, cert.Key) || cert.Server >= len(in.Census.ServerCertificates) {
			continue
		}
		sc := in.Census.ServerCertificates[cert.Server]
		if sc.IssuedBy != "new" {
			return fmt.Sprintf("Secret %s does not hold a leaf of %s yet (Certificate %s)", sc.Secret, in.NewCA, cert.Key)
		}
		for _, s := range in.Census.Stragglers {
			if s.Step == v1alpha1.StepSwitchServerCert && cert.Server < len(in.Servers) && s.Object == in.Servers[cert.Server] {
				return fmt.Sprintf("pod %s/%s: %s", s.Namespace, s.Pod, s.Reason)
			}
		}
	}
	if in.Census.StragglersOmitted > 0 {
		return fmt.Sprintf("%d stragglers are not listed in the census: the canary cannot be told apart", in.Census.StragglersOmitted)
	}
	return ""
}

// rollback backs out while the old CA is in the bundle: the Certificates
// get their issuers back, and once no server certificate Secret holds a
// leaf of the new CA, the new CA leaves the bundle.
func (d *decider) rollback() {
	in, st := d.in, d.st
	if step(st, v1alpha1.StepRemoveOldCA).Started != nil {
		d.stop("rollback refused: remove-old-ca has started, the old CA may be gone from consumers; run the rotation forward (action Run)")
		return
	}
	rb := ensureStep(st, v1alpha1.StepRollback)
	st.Step = v1alpha1.StepRollback
	if rb.Started == nil {
		rb.Started = now(in.Now)
		st.Phase, st.Message = v1alpha1.PhaseRollingBack, "rolling back"
		d.event(true, EventStarted, "rollback started")
		d.moved()
		return
	}
	sw := step(st, v1alpha1.StepSwitchServerCert)
	if rb.CanaryWritten == nil {
		if sw.CanaryWritten != nil || sw.Written != nil {
			var names []string
			for _, r := range st.Issuers {
				d.out.Writes = append(d.out.Writes, Write{Kind: SetIssuer, Certificate: r.Certificate, IssuerRef: r.IssuerRef})
				names = append(names, r.Certificate)
			}
			d.event(true, EventWrote, "rollback: %s issued by their issuers again", strings.Join(names, ", "))
		}
		rb.CanaryWritten = now(in.Now)
		st.Phase, st.Message = v1alpha1.PhaseRollingBack, "issuers restored"
		d.moved()
		return
	}
	if rb.Written == nil {
		for _, sc := range in.Census.ServerCertificates {
			if sc.IssuedBy == "new" {
				st.Phase, st.Message = v1alpha1.PhaseRollingBack, fmt.Sprintf("waiting for Secret %s to hold a leaf of %s again before %s leaves %s", sc.Secret, in.OldCA, in.NewCA, in.BundleName)
				return
			}
		}
		if step(st, v1alpha1.StepAddNewCA).Started != nil {
			d.out.Writes = append(d.out.Writes, Write{Kind: RemoveNewCA})
			d.event(true, EventWrote, "rollback: %s no longer holds %s", in.BundleName, in.NewCA)
		}
		rb.Written = now(in.Now)
		d.moved()
		return
	}
	rb.Done = now(in.Now)
	st.Phase, st.Step, st.Message = v1alpha1.PhaseRolledBack, "", "rolled back: the bundle holds "+in.OldCA+" and not "+in.NewCA+"; the Certificates have their issuers back"
	d.event(true, EventRolledBack, "rotation rolled back")
}

// deadline reports, once, a rotation not complete by the old CA's expiry
// less the margin.
func (d *decider) deadline() {
	in, st := d.in, d.st
	if in.OldCAExpires.IsZero() {
		return
	}
	margin := DefaultDeadlineMargin
	if m := durationOf(in.Spec.DeadlineMargin); m > 0 {
		margin = m
	}
	dl := in.OldCAExpires.Add(-margin)
	st.Deadline = now(dl)
	if !in.Now.Before(dl) && !st.DeadlinePassed {
		st.DeadlinePassed = true
		d.event(true, EventDeadline, "the rotation is not complete %s before %s expires (%s, at %s): %s", margin, in.OldCA,
			in.OldCAExpires.UTC().Format(time.RFC3339), or(st.Step, "the start"), or(st.Message, "not started"))
	}
}

// plan is what the rotation writes and waits for, in order, from where it
// stands.
func (d *decider) plan() []string {
	in, st := d.in, d.st
	var p []string
	add := func(stepName, format string, args ...any) {
		if step(st, stepName).Done == nil {
			p = append(p, stepName+": "+fmt.Sprintf(format, args...))
		}
	}
	add(v1alpha1.StepAddNewCA, "write %s: add %s beside %s", in.BundleName, in.NewCA, in.OldCA)
	add(v1alpha1.StepAddNewCA, "wait until the census proves every consumer trusts %s", in.NewCA)
	restart := func(stepName string) {
		n := 0
		for _, r := range in.ReadAtStart {
			if r.Step != stepName && (stepName != v1alpha1.StepRemoveOldCA || r.Step != v1alpha1.StepAddNewCA) {
				continue
			}
			if n++; n <= MaxPlanConsumers {
				add(stepName, "%s reads at start: it must restart after the write (an opted-in workload is rolled) or be acknowledged", r.Consumer)
			}
		}
		if n > MaxPlanConsumers {
			add(stepName, "and %d more consumers that read at start", n-MaxPlanConsumers)
		}
	}
	restart(v1alpha1.StepAddNewCA)
	if cm := in.Spec.Reissue.CertManager; cm != nil {
		issuers := st.Issuers
		if len(issuers) == 0 { // not recorded yet: what would be
			for _, c := range in.Certificates {
				issuers = append(issuers, v1alpha1.RecordedIssuer{Certificate: c.Key, IssuerRef: c.IssuerRef})
			}
		}
		for _, r := range issuers {
			what := ""
			if r.Canary && in.Spec.Canary != nil {
				what = " (canary, then soak " + durationOf(in.Spec.Canary.Soak).String() + ")"
			}
			add(v1alpha1.StepSwitchServerCert, "switch Certificate %s from %s to %s%s", r.Certificate, issuer(r.IssuerRef), issuer(cm.IssuerRef), what)
		}
		for _, m := range in.Missing {
			add(v1alpha1.StepSwitchServerCert, "no Certificate issues %s: the step will stop", m)
		}
	} else {
		add(v1alpha1.StepSwitchServerCert, "wait for someone else to issue leaves of %s", in.NewCA)
	}
	restart(v1alpha1.StepSwitchServerCert)
	add(v1alpha1.StepSwitchServerCert, "wait until every server is proven to serve a leaf of %s (served or reported)", in.NewCA)
	add(v1alpha1.StepRemoveOldCA, "write %s: remove %s", in.BundleName, in.OldCA)
	restart(v1alpha1.StepRemoveOldCA)
	add(v1alpha1.StepRemoveOldCA, "wait until the census proves no consumer trusts %s", in.OldCA)
	return p
}

// step returns the progress of step name (zero when not started).
func step(st *v1alpha1.DriveStatus, name string) v1alpha1.DriveStepStatus {
	for _, s := range st.Steps {
		if s.Name == name {
			return s
		}
	}
	return v1alpha1.DriveStepStatus{Name: name}
}

func ensureStep(st *v1alpha1.DriveStatus, name string) *v1alpha1.DriveStepStatus {
	for i := range st.Steps {
		if st.Steps[i].Name == name {
			return &st.Steps[i]
		}
	}
	st.Steps = append(st.Steps, v1alpha1.DriveStepStatus{Name: name})
	return &st.Steps[len(st.Steps)-1]
}

func hasStarted(st *v1alpha1.DriveStatus) bool {
	return step(st, v1alpha1.StepAddNewCA).Written != nil
}

func issuer(r v1alpha1.IssuerRef) string { return or(r.Kind, "Issuer") + "/" + r.Name }

func now(t time.Time) *metav1.Time {
	m := metav1.NewTime(t)
	return &m
}

func durationOf(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
