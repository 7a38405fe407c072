package controller

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
)

// shiftedClock is the real clock moved by an offset the test sets: it runs at
// the real pace (so that the controller's RequeueAfter, which the work queue
// waits in real time, lands when the shifted time says), from wherever a test
// wants the controller to believe it is.
type shiftedClock struct{ offset atomic.Int64 }

func clockAt(t time.Time) *shiftedClock {
	c := &shiftedClock{}
	c.set(t)
	return c
}

func (c *shiftedClock) set(t time.Time) { c.offset.Store(int64(time.Until(t))) }

func (c *shiftedClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// untilShifted is how long, in real time, until the shifted clock reads t.
func (c *shiftedClock) untilShifted(t time.Time) time.Duration { return t.Sub(c.Now()) }

func berlin(t testing.TB, local string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04:05", local, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func annotateDeployment(t testing.TB, ns, name string, kv ...string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{`
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			patch += ","
		}
		patch += `"` + kv[i] + `":"` + kv[i+1] + `"`
	}
	patch += `}}}`
	if _, err := clientset().AppsV1().Deployments(ns).Patch(testContext(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func annotateNamespace(t testing.TB, ns, key, value string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"` + key + `":"` + value + `"}}}`
	if _, err := clientset().CoreV1().Namespaces().Patch(testContext(t), ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWindowDefersToItsStartAcrossARestart: two changes outside a Saturday
// 02:00 Europe/Berlin window are deferred (RolloutDeferred, outside_window,
// the next window named), recorded on the workload (rollout-pending); the
// controller is stopped and another started just before the window (a
// restart in the middle of the deferral): it rolls at the window's start,
// once, with both changes in one rollout.
func TestWindowDefersToItsStartAcrossARestart(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "cfg", map[string]string{"a": "1", "b": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("cfg", "a", "b"), with(optIn,
		rollout.AnnotationRolloutWindows, "CRON_TZ=Europe/Berlin 0 2 * * SAT for 1h")))
	start := berlin(t, "2026-12-05 02:00:00") // a Saturday: 01:00 UTC
	clk := clockAt(start.Add(-3 * time.Hour))
	o := testOptions()
	o.Clock = clk
	first := startController(t, ns, o)
	waitAdopted(t, ns, "app")
	waitReplicaSets(t, ns, "app", 1)

	updateSecret(t, ns, "cfg", setKey("a", "2"))
	ev := waitEvent(t, ns, "app", eventDeferred, "next window at 2026-12-05T01:00:00Z")
	for _, want := range []string{"Secret cfg key a changed", "deferred (outside_window)", "CRON_TZ=Europe/Berlin 0 2 * * SAT for 1h", "rolling at 2026-12-05T01:00:00Z"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("deferral Event %q lacks %q", ev.Message, want)
		}
	}
	updateSecret(t, ns, "cfg", setKey("b", "2"))
	waitEvent(t, ns, "app", eventDeferred, "Secret cfg key a changed, Secret cfg key b changed")
	if got := first.counter("Deployment", resultDeferred, reasonOutsideWindow); got != 2 {
		t.Errorf("deferred/outside_window counted %d times, want 2 (one per change)", got)
	}
	var pending string
	waitFor(t, "the pending annotation", func() (bool, error) {
		pending = getDeployment(t, ns, "app").Annotations[rollout.AnnotationRolloutPending]
		return strings.Contains(pending, "rolls-at=2026-12-05T01:00:00Z"), nil
	})
	if !strings.Contains(pending, "reason=outside_window") {
		t.Errorf("pending %q", pending)
	}
	if got := testutilGaugeVec(t, first, "hotcert_rollout_window_pending_workloads"); got != 1 {
		t.Errorf("window pending gauge %v, want 1", got)
	}
	first.Stop()
	if replicaSets(t, ns, "app") != 1 {
		t.Fatal("rolled outside the window")
	}

	clk.set(start.Add(-2 * time.Second))
	second := startController(t, ns, o)
	holds(t, clk.untilShifted(start)-300*time.Millisecond, "no rollout before the window opens", func() (bool, error) {
		return replicaSets(t, ns, "app") == 1, nil
	})
	waitReplicaSets(t, ns, "app", 2)
	rolled := waitEvent(t, ns, "app", eventRolled, "Secret cfg key a changed, Secret cfg key b changed")
	if strings.Contains(rolled.Message, "outside the rollout windows") {
		t.Errorf("rolled inside the window, yet the Event says %q", rolled.Message)
	}
	d := getDeployment(t, ns, "app")
	if last := parseTime(t, d.Annotations[rollout.AnnotationLastRollout]); last.Before(start) || last.After(start.Add(30*time.Second)) {
		t.Errorf("rolled at %s, want at the window's start %s", last, start)
	}
	if v, ok := d.Annotations[rollout.AnnotationRolloutPending]; ok {
		t.Errorf("pending annotation %q left after the rollout", v)
	}
	if pendingSince(pending).After(start.Add(-2 * time.Hour)) {
		t.Errorf("pending since %s: not the first deferral's time", pendingSince(pending))
	}
	holds(t, time.Second, "one rollout", func() (bool, error) { return replicaSets(t, ns, "app") == 2, nil })
	if got := second.counter("Deployment", resultRolled, reasonConfigChanged); got != 1 {
		t.Errorf("rolled %d times", got)
	}
}

// TestExpiryOverridesTheWindow: the certificate the pods run (recorded at
// adoption) reaches its expiry margin, a sixth of its 24-hour lifetime,
// before the next window: the renewal, deferred, rolls at the margin, with a
// WindowOverridden Warning and the overrides counted.
func TestExpiryOverridesTheWindow(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	deadline := time.Now().Add(72 * time.Hour).Truncate(time.Second)
	running := testCA.MustIssue(hotcerttest.WithValidity(deadline.Add(-20*time.Hour), deadline.Add(4*time.Hour)))
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": running.ChainPEM, "tls.key": running.KeyPEM}})
	// The only window is a year away.
	far := deadline.AddDate(1, 0, 0).UTC()
	create(t, deployment(ns, "app", 0, mountAll("tls"), with(optIn,
		rollout.AnnotationRolloutWindows, far.Format(time.RFC3339)+"/"+far.Add(time.Hour).Format(time.RFC3339))))
	o := testOptions()
	clk := clockAt(deadline.Add(-8 * time.Second))
	o.Clock = clk
	c := startController(t, ns, o)
	d := waitAdopted(t, ns, "app")
	if got, want := d.Annotations[rollout.AnnotationRunningValidity], deadline.Add(-20*time.Hour).UTC().Format(time.RFC3339)+"/"+deadline.Add(4*time.Hour).UTC().Format(time.RFC3339); got != want {
		t.Fatalf("running validity %q, want %q", got, want)
	}

	renewal := testCA.MustIssue(hotcerttest.WithValidity(deadline.Add(-time.Hour), deadline.Add(23*time.Hour)))
	updateSecret(t, ns, "tls", func(s *corev1.Secret) { s.Data["tls.crt"], s.Data["tls.key"] = renewal.ChainPEM, renewal.KeyPEM })
	ev := waitEvent(t, ns, "app", eventDeferred, "rolling at "+deadline.UTC().Format(time.RFC3339))
	if !strings.Contains(ev.Message, "its expiry margin (4h0m0s) is reached at "+deadline.UTC().Format(time.RFC3339)) {
		t.Errorf("deferral %q does not name the margin", ev.Message)
	}
	if got := testutilGaugeVec(t, c, "hotcert_rollout_overdue_workloads"); got != 0 {
		t.Errorf("overdue before the deadline: %v", got)
	}
	holds(t, clk.untilShifted(deadline)-300*time.Millisecond, "no rollout before the margin", func() (bool, error) {
		return replicaSets(t, ns, "app") == 1, nil
	})
	waitReplicaSets(t, ns, "app", 2)
	over := waitEvent(t, ns, "app", eventWindowOverridden, "its expiry margin (4h0m0s) was reached at "+deadline.UTC().Format(time.RFC3339))
	if over.Type != corev1.EventTypeWarning {
		t.Errorf("override Event type %s", over.Type)
	}
	waitEvent(t, ns, "app", eventRolled, "outside the rollout windows: the certificate the pods run expires at "+deadline.Add(4*time.Hour).UTC().Format(time.RFC3339))
	if got := testutilCounter(c.ctl.report.metrics.overrides.WithLabelValues("Deployment", string(reasonExpiryMargin))); got != 1 {
		t.Errorf("overrides counted %v, want 1", got)
	}
	d = getDeployment(t, ns, "app")
	if last := parseTime(t, d.Annotations[rollout.AnnotationLastRollout]); last.Before(deadline) {
		t.Errorf("rolled at %s, before the margin %s", last, deadline)
	}
	if got := d.Annotations[rollout.AnnotationRunningValidity]; !strings.HasSuffix(got, "/"+deadline.Add(23*time.Hour).UTC().Format(time.RFC3339)) {
		t.Errorf("running validity after the rollout %q: not the renewal's", got)
	}
}

// TestRotateNowRollsOnce: a rotate-now token rolls a workload whose content
// did not change, outside its namespace's window, once: the token is
// recorded in the same update, so neither a restart of the controller nor a
// later reconcile rolls it again; a new token rolls again.
func TestRotateNowRollsOnce(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	annotateNamespace(t, ns, rollout.AnnotationRolloutWindows, "2020-01-01T00:00:00Z/2020-01-02T00:00:00Z")
	createSecret(t, secret(ns, "cfg", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("cfg", "a"), optIn))
	o := testOptions()
	o.MinInterval = time.Hour // rotate-now is not held by it either
	c := startController(t, ns, o)
	waitAdopted(t, ns, "app")
	waitReplicaSets(t, ns, "app", 1)

	annotateDeployment(t, ns, "app", rollout.AnnotationRotateNow, "2026-12-02T03:00:00Z-alice")
	waitReplicaSets(t, ns, "app", 2)
	ev := waitEvent(t, ns, "app", eventRolled, `rotate-now requested (hotcert.dev/rotate-now="2026-12-02T03:00:00Z-alice")`)
	if got := c.counter("Deployment", resultRolled, reasonRotateNow); got != 1 {
		t.Errorf("rolled/rotate_now counted %d (%s)", got, ev.Message)
	}
	if got := getDeployment(t, ns, "app").Annotations[rollout.AnnotationRotated]; got != "2026-12-02T03:00:00Z-alice" {
		t.Errorf("rotated %q", got)
	}
	c.Stop()
	startController(t, ns, o)
	annotateDeployment(t, ns, "app", "example.com/poke", "1")
	holds(t, 2*time.Second, "the same token never rolls twice", func() (bool, error) {
		return replicaSets(t, ns, "app") == 2, nil
	})
	// A change now waits for the namespace's window (none opens again).
	updateSecret(t, ns, "cfg", setKey("a", "2"))
	waitEvent(t, ns, "app", eventDeferred, "Namespace "+ns+": 2020-01-01T00:00:00Z/2020-01-02T00:00:00Z); no window opens again")
	annotateDeployment(t, ns, "app", rollout.AnnotationRotateNow, "2")
	waitReplicaSets(t, ns, "app", 3)
	waitEvent(t, ns, "app", eventRolled, `rotate-now requested (hotcert.dev/rotate-now="2"), with Secret cfg key a changed`)
}

// TestWorkloadWindowPrecedesNamespace: "always" on the workload lifts its
// namespace's window; a dry-run workload's Event shows the schedule.
func TestWorkloadWindowPrecedesNamespace(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	annotateNamespace(t, ns, rollout.AnnotationRolloutWindows, "CRON_TZ=America/New_York 0 3 * * * for 1h")
	createSecret(t, secret(ns, "cfg", map[string]string{"a": "1"}))
	create(t, deployment(ns, "free", 0, envFrom("cfg", "a"), with(optIn, rollout.AnnotationRolloutWindows, "always")))
	create(t, deployment(ns, "dry", 0, envFrom("cfg", "a"), with(optIn, rollout.AnnotationDryRun, "true")))
	o := testOptions()
	o.Clock = clockAt(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)) // 07:00 in New York
	startController(t, ns, o)
	waitAdopted(t, ns, "free")
	waitReplicaSets(t, ns, "free", 1)
	waitFor(t, "the dry-run workload reconciled", func() (bool, error) { return len(events(t, ns, "dry", "")) > 0 || replicaSets(t, ns, "dry") == 1, nil })
	updateSecret(t, ns, "cfg", setKey("a", "2"))
	waitReplicaSets(t, ns, "free", 2)
	ev := waitEvent(t, ns, "dry", eventWouldRoll, "would defer (outside_window)")
	if !strings.Contains(ev.Message, "next window at 2026-12-03T08:00:00Z") || !strings.Contains(ev.Message, "Namespace "+ns) {
		t.Errorf("dry-run Event %q does not show the schedule", ev.Message)
	}
}

// testutilGaugeVec sums the samples of the gauge name in r's registry.
func testutilGaugeVec(t testing.TB, r *running, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// TestRotateNowWithinTheBudget: rotate-now lifts windows and the minimum
// interval, not the global budget: with one rollout per hour, the second of
// two requests waits for the budget (RolloutDeferred, budget), and its token
// is not recorded as honoured.
func TestRotateNowWithinTheBudget(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "cfg", map[string]string{"a": "1"}))
	create(t, deployment(ns, "one", 0, envFrom("cfg", "a"), optIn))
	create(t, deployment(ns, "two", 0, envFrom("cfg", "a"), optIn))
	o := testOptions()
	o.MaxRollouts, o.BudgetWindow = 1, time.Hour
	startController(t, ns, o)
	waitAdopted(t, ns, "one")
	waitAdopted(t, ns, "two")
	annotateDeployment(t, ns, "one", rollout.AnnotationRotateNow, "t1")
	waitReplicaSets(t, ns, "one", 2)
	annotateDeployment(t, ns, "two", rollout.AnnotationRotateNow, "t1")
	waitEvent(t, ns, "two", eventDeferred, "global rollout budget spent")
	holds(t, time.Second, "no rollout past the budget", func() (bool, error) {
		return replicaSets(t, ns, "two") == 1 && getDeployment(t, ns, "two").Annotations[rollout.AnnotationRotated] == "", nil
	})
}

// TestRunningValidityRecordedForEarlierAdoptions: a workload adopted before
// the controller recorded the running certificate's validity (the annotation
// absent) gets it at its next reconcile, without a rollout.
func TestRunningValidityRecordedForEarlierAdoptions(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	leaf := issue()
	createSecret(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}})
	create(t, deployment(ns, "app", 0, mountAll("tls"), optIn))
	c := startController(t, ns, testOptions())
	want := waitAdopted(t, ns, "app").Annotations[rollout.AnnotationRunningValidity]
	if !strings.HasSuffix(want, "/"+leaf.Cert.NotAfter.UTC().Format(time.RFC3339)) {
		t.Fatalf("running validity %q, want the leaf's NotAfter %s", want, leaf.Cert.NotAfter.UTC())
	}
	c.Stop()
	patch := `{"metadata":{"annotations":{"` + rollout.AnnotationRunningValidity + `":null}}}`
	if _, err := clientset().AppsV1().Deployments(ns).Patch(testContext(t), "app", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, ns, testOptions())
	waitFor(t, "the running validity recorded again", func() (bool, error) {
		return getDeployment(t, ns, "app").Annotations[rollout.AnnotationRunningValidity] == want, nil
	})
	if replicaSets(t, ns, "app") != 1 {
		t.Fatal("recording the running validity rolled the workload")
	}
}
