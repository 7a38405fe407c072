package drive

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a rotation under test: the spec, the census the test makes up,
// and the progress Decide returns, fed back as a controller would.
type world struct {
	t     *testing.T
	spec  v1alpha1.DriveSpec
	gen   int64
	now   time.Time
	cen   v1alpha1.TrustRotationStatus
	certs []Certificate
	prev  *v1alpha1.DriveStatus
	// restart are the consumers that read at start.
	restart []ReadAtStart
	// starting are the steps unproven only while containers start.
	starting map[string]bool
	// failures the consumers report (since w.prev.FailuresSince).
	failures []Failure
	// writes and events made so far.
	writes []Write
	events []string
}

func newWorld(t *testing.T, spec v1alpha1.DriveSpec, certs ...Certificate) *world {
	w := &world{t: t, spec: spec, gen: 1, now: t0, certs: certs}
	w.cen.Trust = []v1alpha1.TrustObjectStatus{{Object: "ConfigMap app/ca key ca.crt", Objects: 1, HoldOld: 1}}
	for range certs {
		w.cen.ServerCertificates = append(w.cen.ServerCertificates, v1alpha1.ServerCertificateStatus{Secret: "app/tls", IssuedBy: "old"})
	}
	w.set(v1alpha1.StepAddNewCA, false, "2 consumers do not trust CA-2026 yet")
	w.set(v1alpha1.StepSwitchServerCert, false, "not safe")
	w.set(v1alpha1.StepRemoveOldCA, false, "not safe")
	return w
}

func (w *world) set(step string, done bool, msg string) {
	status := metav1.ConditionFalse
	if done {
		status = metav1.ConditionTrue
	}
	for i := range w.cen.Conditions {
		if w.cen.Conditions[i].Type == step {
			w.cen.Conditions[i].Status, w.cen.Conditions[i].Message = status, msg
			return
		}
	}
	w.cen.Conditions = append(w.cen.Conditions, metav1.Condition{Type: step, Status: status, Reason: v1alpha1.ReasonInProgress, Message: msg})
}

// decide decides once, records the writes, and feeds the progress back.
func (w *world) decide() Decision {
	w.t.Helper()
	d := Decide(Input{Now: w.now, Generation: w.gen, Spec: &w.spec, Census: &w.cen, Prev: w.prev, BundleName: "ConfigMap app/ca key ca.crt",
		OldCA: "CA-2025", NewCA: "CA-2026", OldCAExpires: t0.Add(30 * 24 * time.Hour), Servers: []string{"Secret app/tls key tls.crt", "Secret app/tls2 key tls.crt"}, Certificates: w.certs, ReadAtStart: w.restart, Starting: w.starting, Failures: w.failures})
	w.writes = append(w.writes, d.Writes...)
	for _, e := range d.Events {
		w.events = append(w.events, e.Reason+": "+e.Message)
	}
	w.prev = d.Status
	w.now = w.now.Add(time.Second)
	return d
}

func (w *world) phase() string { return w.prev.Phase }

func kinds(ws []Write) []WriteKind {
	var out []WriteKind
	for _, w := range ws {
		out = append(out, w.Kind)
	}
	return out
}

var external = v1alpha1.DriveSpec{Reissue: v1alpha1.Reissue{External: &v1alpha1.ExternalReissue{}}}

// TestStepsInOrderEachOnceProven: each step is started (nothing written),
// written once, and done only once the census proves it; a step is never
// written before the one before it is proven, and never written twice.
func TestStepsInOrderEachOnceProven(t *testing.T) {
	w := newWorld(t, external)
	if d := w.decide(); len(d.Writes) != 0 || w.prev.Steps[0].Started == nil {
		t.Fatalf("first decision writes %v, progress %+v: the intent is recorded before any write", d.Writes, w.prev)
	}
	if d := w.decide(); len(d.Writes) != 1 || d.Writes[0].Kind != AddNewCA {
		t.Fatalf("second decision writes %v, want the union", d.Writes)
	}
	w.cen.Trust[0].HoldNew = 1
	for range 5 { // the census has not proven it: nothing more is written
		if d := w.decide(); len(d.Writes) != 0 || w.phase() != v1alpha1.PhaseWaiting {
			t.Fatalf("writes %v, phase %s while add-new-ca is not proven", d.Writes, w.phase())
		}
	}
	if !strings.Contains(w.prev.Message, "2 consumers do not trust CA-2026 yet") {
		t.Fatalf("message %q does not carry the census's", w.prev.Message)
	}
	w.set(v1alpha1.StepAddNewCA, true, "every consumer trusts CA-2026")
	w.decide() // done
	if s := step(w.prev, v1alpha1.StepAddNewCA); s.Done == nil {
		t.Fatalf("add-new-ca not done: %+v", w.prev)
	}
	w.decide() // switch started
	w.decide() // external: written (nothing to write)
	w.decide()
	if w.phase() != v1alpha1.PhaseWaiting || w.prev.Step != v1alpha1.StepSwitchServerCert {
		t.Fatalf("phase %s step %s", w.phase(), w.prev.Step)
	}
	w.set(v1alpha1.StepSwitchServerCert, true, "")
	w.decide() // done
	w.decide() // remove started
	if d := w.decide(); len(d.Writes) != 1 || d.Writes[0].Kind != RemoveOldCA {
		t.Fatalf("writes %v, want the old CA removed", d.Writes)
	}
	w.cen.Trust[0].HoldOld = 0
	w.decide()
	w.set(v1alpha1.StepRemoveOldCA, true, "")
	w.decide()
	w.decide()
	if w.phase() != v1alpha1.PhaseComplete {
		t.Fatalf("phase %s: %+v", w.phase(), w.prev)
	}
	if got := kinds(w.writes); len(got) != 2 || got[0] != AddNewCA || got[1] != RemoveOldCA {
		t.Fatalf("writes %v", got)
	}
	if d := w.decide(); len(d.Writes) != 0 || len(d.Events) != 0 {
		t.Fatalf("a complete rotation moves again: %+v", d)
	}
}

// TestResumeFromStatusRepeatsNothing: a controller that restarts holds only
// the status: decided from it, the rotation neither writes a step again nor
// skips one.
func TestResumeFromStatusRepeatsNothing(t *testing.T) {
	w := newWorld(t, external)
	w.decide()
	w.decide() // wrote the union
	w.cen.Trust[0].HoldNew = 1
	saved := w.prev.DeepCopy()
	// A new controller: same status, nothing in memory.
	w2 := newWorld(t, external)
	w2.cen, w2.prev = w.cen, saved
	for range 3 {
		if d := w2.decide(); len(d.Writes) != 0 {
			t.Fatalf("the resumed controller wrote %v again", d.Writes)
		}
	}
	w2.set(v1alpha1.StepAddNewCA, true, "")
	w2.decide()
	w2.decide()
	if w2.prev.Step != v1alpha1.StepSwitchServerCert {
		t.Fatalf("step %s after resuming", w2.prev.Step)
	}
}

// TestUndoneStepStops: a step recorded done that the census no longer
// proves, or the old CA removed from the bundle by hand before
// remove-old-ca, stops the rotation, named, until the spec changes.
func TestUndoneStepStops(t *testing.T) {
	w := newWorld(t, external)
	w.decide()
	w.decide()
	w.cen.Trust[0].HoldNew = 1
	w.set(v1alpha1.StepAddNewCA, true, "")
	w.decide()
	w.set(v1alpha1.StepAddNewCA, false, "pod app/late (subPath) does not trust CA-2026")
	w.decide()
	if w.phase() != v1alpha1.PhaseStopped || !strings.Contains(w.prev.Message, "pod app/late (subPath)") {
		t.Fatalf("phase %s, message %q", w.phase(), w.prev.Message)
	}
	w.set(v1alpha1.StepAddNewCA, true, "")
	if w.decide(); w.phase() != v1alpha1.PhaseStopped {
		t.Fatal("a stopped rotation went on without the spec changing")
	}
	w.gen++
	if w.decide(); w.phase() == v1alpha1.PhaseStopped {
		t.Fatalf("still stopped after the spec changed: %q", w.prev.Message)
	}

	w.cen.Trust[0].HoldOld = 0 // a one-step swap by hand
	w.decide()
	if w.phase() != v1alpha1.PhaseStopped || !strings.Contains(w.prev.Message, "no longer holds CA-2025 before remove-old-ca") {
		t.Fatalf("phase %s, message %q", w.phase(), w.prev.Message)
	}
	if n := strings.Count(strings.Join(w.events, "\n"), EventStopped); n != 2 {
		t.Fatalf("%d Stopped events, want one per stop:\n%s", n, strings.Join(w.events, "\n"))
	}
}

func certManager(canary *v1alpha1.Canary) v1alpha1.DriveSpec {
	return v1alpha1.DriveSpec{Reissue: v1alpha1.Reissue{CertManager: &v1alpha1.CertManagerReissue{IssuerRef: v1alpha1.IssuerRef{Name: "ca-2026", Kind: "ClusterIssuer"}}},
		Canary: canary}
}

// passAdd takes add-new-ca through.
func (w *world) passAdd() {
	w.decide()
	w.decide()
	w.cen.Trust[0].HoldNew = 1
	w.set(v1alpha1.StepAddNewCA, true, "")
	w.decide()
}

// TestCanaryThenSoakThenRest: the canary's Certificates are switched first,
// the rest only once the canary is proven and has soaked; the issuers are
// recorded before any is switched.
func TestCanaryThenSoakThenRest(t *testing.T) {
	old := v1alpha1.IssuerRef{Name: "ca-2025", Kind: "ClusterIssuer"}
	w := newWorld(t, certManager(&v1alpha1.Canary{Percent: 50, Soak: &metav1.Duration{Duration: time.Minute}}),
		Certificate{Key: "app/a", IssuerRef: old, Server: 0}, Certificate{Key: "app/b", IssuerRef: old, Server: 1})
	w.cen.ServerCertificates[1].Secret = "app/tls2"
	w.passAdd()
	w.decide() // switch started: issuers recorded
	if len(w.prev.Issuers) != 2 || !w.prev.Issuers[0].Canary || w.prev.Issuers[1].Canary || w.prev.Issuers[0].IssuerRef != old {
		t.Fatalf("issuers %+v", w.prev.Issuers)
	}
	before := len(w.writes)
	w.decide()
	if got := w.writes[before:]; len(got) != 1 || got[0].Certificate != "app/a" || got[0].IssuerRef.Name != "ca-2026" {
		t.Fatalf("canary writes %+v", got)
	}
	w.decide()
	if !strings.Contains(w.prev.Message, "Secret app/tls does not hold a leaf of CA-2026") {
		t.Fatalf("message %q", w.prev.Message)
	}
	w.cen.ServerCertificates[0].IssuedBy = "new"
	w.cen.Stragglers = []v1alpha1.Straggler{{Namespace: "app", Pod: "a-0", Object: "Secret app/tls key tls.crt", Step: v1alpha1.StepSwitchServerCert, Reason: "serves a leaf of CA-2025"}}
	w.decide()
	if !strings.Contains(w.prev.Message, "pod app/a-0: serves a leaf of CA-2025") {
		t.Fatalf("message %q", w.prev.Message)
	}
	w.cen.Stragglers = nil
	d := w.decide()
	if !strings.Contains(w.prev.Message, "soaks until") || d.Again <= 0 || len(w.writes) != before+1 {
		t.Fatalf("message %q, again %v, writes %+v", w.prev.Message, d.Again, w.writes[before:])
	}
	w.now = w.now.Add(time.Minute)
	w.decide()
	if got := w.writes[before:]; len(got) != 2 || got[1].Certificate != "app/b" {
		t.Fatalf("writes %+v", got)
	}
}

// TestMissingCertificateStops: a server certificate Secret that no
// Certificate issues stops the rotation before switch-server-cert writes.
func TestMissingCertificateStops(t *testing.T) {
	w := newWorld(t, certManager(nil), Certificate{Key: "app/a", Server: 0})
	w.passAdd()
	d := Decide(Input{Now: w.now, Generation: 1, Spec: &w.spec, Census: &w.cen, Prev: w.prev, Missing: []string{"app/tls2"}})
	if d.Status.Phase != v1alpha1.PhaseStopped || !strings.Contains(d.Status.Message, "no cert-manager Certificate issues app/tls2") || len(d.Writes) != 0 {
		t.Fatalf("%+v", d)
	}
}

// TestRollback: the Certificates get their recorded issuers back, the new CA
// leaves the bundle only once no server certificate Secret holds its leaf;
// once remove-old-ca has started, a rollback is refused.
func TestRollback(t *testing.T) {
	old := v1alpha1.IssuerRef{Name: "ca-2025", Kind: "ClusterIssuer"}
	w := newWorld(t, certManager(nil), Certificate{Key: "app/a", IssuerRef: old, Server: 0})
	w.passAdd()
	w.decide()
	w.decide() // switched
	w.cen.ServerCertificates[0].IssuedBy = "new"
	w.spec.Action, w.gen = v1alpha1.ActionRollback, 2
	before := len(w.writes)
	w.decide() // started
	w.decide() // issuers back
	if got := w.writes[before:]; len(got) != 1 || got[0].Kind != SetIssuer || got[0].IssuerRef != old {
		t.Fatalf("writes %+v", got)
	}
	if d := w.decide(); len(d.Writes) != 0 || !strings.Contains(w.prev.Message, "waiting for Secret app/tls") {
		t.Fatalf("the new CA left the bundle while a Secret holds its leaf: %+v", d)
	}
	w.cen.ServerCertificates[0].IssuedBy = "old"
	if d := w.decide(); len(d.Writes) != 1 || d.Writes[0].Kind != RemoveNewCA {
		t.Fatalf("writes %+v", d.Writes)
	}
	w.decide()
	if w.phase() != v1alpha1.PhaseRolledBack {
		t.Fatalf("phase %s", w.phase())
	}

	w = newWorld(t, external)
	w.passAdd()
	w.decide()
	w.decide()
	w.set(v1alpha1.StepSwitchServerCert, true, "")
	w.decide()
	w.decide() // remove-old-ca started
	w.spec.Action = v1alpha1.ActionRollback
	if d := w.decide(); len(d.Writes) != 0 || w.phase() != v1alpha1.PhaseStopped || !strings.Contains(w.prev.Message, "rollback refused") {
		t.Fatalf("%+v", d.Status)
	}
}

// TestPauseAbortDryRun: pause, abort and dry run write nothing; a dry run
// still plans.
func TestPauseAbortDryRun(t *testing.T) {
	for _, c := range []struct {
		edit  func(*v1alpha1.DriveSpec)
		phase string
	}{
		{func(s *v1alpha1.DriveSpec) { s.Action = v1alpha1.ActionPause }, v1alpha1.PhasePaused},
		{func(s *v1alpha1.DriveSpec) { s.Action = v1alpha1.ActionAbort }, v1alpha1.PhaseAborted},
		{func(s *v1alpha1.DriveSpec) { s.DryRun = true }, v1alpha1.PhaseDryRun},
	} {
		w := newWorld(t, certManager(nil), Certificate{Key: "app/a", IssuerRef: v1alpha1.IssuerRef{Name: "ca-2025"}})
		w.restart = []ReadAtStart{{Step: v1alpha1.StepAddNewCA, Consumer: "pod app/legacy-0 container app (subPath of ConfigMap app/ca key ca.crt)"}}
		c.edit(&w.spec)
		for range 4 {
			w.decide()
		}
		if len(w.writes) != 0 || w.phase() != c.phase {
			t.Fatalf("phase %s, writes %v; want %s and none", w.phase(), w.writes, c.phase)
		}
		plan := strings.Join(w.prev.Plan, "\n")
		for _, want := range []string{"add-new-ca: write ConfigMap app/ca key ca.crt: add CA-2026 beside CA-2025", "add-new-ca: pod app/legacy-0 container app (subPath of ConfigMap app/ca key ca.crt) reads at start", "remove-old-ca: pod app/legacy-0 container app (subPath",
			"switch-server-cert: switch Certificate app/a from Issuer/ca-2025 to ClusterIssuer/ca-2026", "remove-old-ca: write ConfigMap app/ca key ca.crt: remove CA-2025"} {
			if !strings.Contains(plan, want) {
				t.Errorf("plan lacks %q:\n%s", want, plan)
			}
		}
	}
}

// TestDeadlineReportedOnce: past the old CA's expiry less the margin, one
// Warning says so.
func TestDeadlineReportedOnce(t *testing.T) {
	w := newWorld(t, external)
	w.spec.DeadlineMargin = &metav1.Duration{Duration: 30*24*time.Hour - 2*time.Second}
	w.decide()
	if w.prev.DeadlinePassed || !w.prev.Deadline.Time.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("deadline %v passed %v", w.prev.Deadline, w.prev.DeadlinePassed)
	}
	for range 4 {
		w.decide()
	}
	if n := strings.Count(strings.Join(w.events, "\n"), EventDeadline); n != 1 || !w.prev.DeadlinePassed {
		t.Fatalf("%d deadline events:\n%s", n, strings.Join(w.events, "\n"))
	}
}

// TestRollsAfterTheKubeletsDelay: the pods that read at start and are not
// proven are rolled for the step being waited on, only once a restart reads
// what the step wrote; proven ones are not.
func TestRollsAfterTheKubeletsDelay(t *testing.T) {
	w := newWorld(t, external)
	w.restart = []ReadAtStart{{Step: v1alpha1.StepAddNewCA, Pod: "app/legacy", Unproven: true}, {Step: v1alpha1.StepAddNewCA, Pod: "app/done"},
		{Step: v1alpha1.StepSwitchServerCert, Pod: "app/server", Unproven: true}}
	w.decide()
	w.decide() // union written
	w.cen.Trust[0].HoldNew = 1
	in := func(after time.Time) Input {
		return Input{Now: w.now, Generation: 1, Spec: &w.spec, Census: &w.cen, Prev: w.prev, ReadAtStart: w.restart,
			RollAfter: map[string]time.Time{v1alpha1.StepAddNewCA: after}}
	}
	if d := Decide(in(w.now.Add(time.Minute))); len(d.Rolls) != 0 || d.Again != time.Minute {
		t.Fatalf("rolled %v (again %v) before a restart could read the union", d.Rolls, d.Again)
	}
	d := Decide(in(w.now))
	if len(d.Rolls) != 1 || d.Rolls[0] != "app/legacy" || d.RollStep != v1alpha1.StepAddNewCA {
		t.Fatalf("rolls %v for %s", d.Rolls, d.RollStep)
	}
	if d := Decide(Input{Now: w.now, Generation: 1, Spec: &w.spec, Census: &w.cen, Prev: w.prev, ReadAtStart: w.restart}); len(d.Rolls) != 0 {
		t.Fatalf("rolled %v before the census saw the write", d.Rolls)
	}
}

// TestPlanIsBounded: however many consumers read at start, the plan names
// at most MaxPlanConsumers per step and counts the rest.
func TestPlanIsBounded(t *testing.T) {
	w := newWorld(t, external)
	for i := range 1000 {
		w.restart = append(w.restart, ReadAtStart{Step: v1alpha1.StepAddNewCA, Consumer: "pod app/p" + strings.Repeat("x", i%3), Pod: "app/p", Unproven: true})
	}
	w.spec.DryRun = true
	w.decide()
	if n := len(w.prev.Plan); n > 2*MaxPlanConsumers+10 {
		t.Fatalf("%d plan lines", n)
	}
	if plan := strings.Join(w.prev.Plan, "\n"); !strings.Contains(plan, "add-new-ca: and 980 more consumers that read at start") {
		t.Fatalf("plan:\n%s", plan)
	}
}

// TestBundleNotFollowedStops: a bundle the census does not follow (not one
// of spec.trust) is never written.
func TestBundleNotFollowedStops(t *testing.T) {
	w := newWorld(t, external)
	d := Decide(Input{Now: w.now, Generation: 1, Spec: &w.spec, Census: &w.cen, Bundle: -1, BundleName: "ConfigMap app/other key ca.crt"})
	if d.Status.Phase != v1alpha1.PhaseStopped || len(d.Writes) != 0 || !strings.Contains(d.Status.Message, "is not one of spec.trust") {
		t.Fatalf("%+v", d.Status)
	}
}

// TestHandshakeFailuresStopTheRotation: handshake failures the consumers
// report after the canary's switch stop the rotation once they reach the
// threshold (not before), naming the consumers, with one Warning; the rest
// are not switched; a spec change resumes it, counting failures afresh
// from then; a threshold of 0 never stops it.
func TestHandshakeFailuresStopTheRotation(t *testing.T) {
	spec := certManager(&v1alpha1.Canary{Percent: 50})
	w := newWorld(t, spec, Certificate{Key: "app/cp", Server: 0}, Certificate{Key: "app/cp2", Server: 1})
	w.failures = []Failure{{Pod: "app/early", Reason: "unknown_authority", Count: 9}}
	w.decide() // add-new-ca started: no write yet, failures not counted
	if w.phase() == v1alpha1.PhaseStopped || w.prev.FailuresSince != nil {
		t.Fatalf("failures before any write stopped the rotation: %+v", w.prev)
	}
	w.failures = nil
	w.decide() // the union
	if w.prev.FailuresSince == nil || !w.prev.FailuresSince.Time.Equal(w.now.Add(-time.Second)) {
		t.Fatalf("failures counted since %v, want the write's time", w.prev.FailuresSince)
	}
	w.cen.Trust[0].HoldNew = 1
	w.set(v1alpha1.StepAddNewCA, true, "")
	w.decide() // done
	w.decide() // switch started
	w.decide() // the canary switched
	canaryAt := w.now.Add(-time.Second)
	if !w.prev.FailuresSince.Time.Equal(canaryAt) {
		t.Fatalf("failures counted since %v, want the canary's switch at %v", w.prev.FailuresSince, canaryAt)
	}
	w.failures = []Failure{{Pod: "app/agent-1", Reason: "unknown_authority", Count: 2}}
	if w.decide(); w.phase() == v1alpha1.PhaseStopped {
		t.Fatalf("stopped below the threshold: %q", w.prev.Message)
	}
	w.failures = []Failure{{Pod: "app/agent-1", Reason: "unknown_authority", Count: 2}, {Pod: "app/agent-2", Reason: "peer_rejected", Count: 1}}
	before := len(w.writes)
	w.cen.ServerCertificates[0].IssuedBy = "new" // the canary would be proven: the failures win
	w.decide()
	if w.phase() != v1alpha1.PhaseStopped || len(w.writes) != before {
		t.Fatalf("phase %s, writes %v", w.phase(), w.writes[before:])
	}
	for _, want := range []string{"3 handshake failures", "threshold 3", "pod app/agent-1 (2 unknown_authority)", "pod app/agent-2 (1 peer_rejected)"} {
		if !strings.Contains(w.prev.Message, want) {
			t.Errorf("message %q lacks %q", w.prev.Message, want)
		}
	}
	w.decide()
	if n := strings.Count(strings.Join(w.events, "\n"), EventStopped); n != 1 || w.phase() != v1alpha1.PhaseStopped {
		t.Fatalf("%d Stopped events, phase %s", n, w.phase())
	}
	// Resumed by a spec change: the failures are counted from then.
	w.gen++
	resumed := w.now
	w.decide()
	if w.phase() == v1alpha1.PhaseStopped || !w.prev.FailuresSince.Time.Equal(resumed) {
		t.Fatalf("phase %s, failures since %v, want %v", w.phase(), w.prev.FailuresSince, resumed)
	}

	// Threshold 0: never stops.
	off := int32(0)
	spec.HandshakeFailureThreshold = &off
	w2 := newWorld(t, spec, Certificate{Key: "app/cp", Server: 0})
	w2.decide()
	w2.decide()
	w2.cen.Trust[0].HoldNew = 1
	w2.failures = []Failure{{Pod: "app/agent-1", Reason: "unknown_authority", Count: 100}}
	if w2.decide(); w2.phase() == v1alpha1.PhaseStopped {
		t.Fatalf("threshold 0 stopped: %q", w2.prev.Message)
	}
}
