package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
	"github.com/hotcert/hotcert/rollout/internal/state"
)

// TestRollsOnlyOnConsumedChange: one update of a consumed key gives exactly one
// new ReplicaSet; a label-only update, an update rewriting identical data, a
// delete and re-create with identical data, and an update of a key the workload
// does not consume give none.
func TestRollsOnlyOnConsumedChange(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1", "unused": "x"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))
	waitReplicaSets(t, ns, "app", 1)
	c := startController(t, ns, testOptions())

	tmpl := podTemplate(t, ns, "app")
	waitAdopted(t, ns, "app")
	if got := podTemplate(t, ns, "app"); got != tmpl {
		t.Fatalf("adoption touched the pod template:\n%s\n%s", tmpl, got)
	}
	waitEvent(t, ns, "app", eventAdopted, "nothing restarted")

	// noRollout makes a change, waits until the controller has read it, and
	// checks that nothing rolled.
	noRollout := func(what string, change func() *corev1.Secret) {
		t.Helper()
		s := change()
		waitFor(t, "the controller to read "+what, func() (bool, error) { return c.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
		holds(t, 500*time.Millisecond, "no rollout after "+what, func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })
		if got := podTemplate(t, ns, "app"); got != tmpl {
			t.Fatalf("%s: the pod template was written", what)
		}
	}
	noRollout("a label-only update", func() *corev1.Secret {
		return updateSecret(t, ns, "s", func(s *corev1.Secret) { s.Labels = map[string]string{"touched": "yes"} })
	})
	noRollout("an update with identical data", func() *corev1.Secret {
		return updateSecret(t, ns, "s", func(s *corev1.Secret) {
			s.Annotations = map[string]string{"rewritten": "yes"}
			s.Data = map[string][]byte{"a": []byte("1"), "unused": []byte("x")}
		})
	})
	noRollout("an update of a key the workload does not consume", func() *corev1.Secret {
		return updateSecret(t, ns, "s", setKey("unused", "y"))
	})
	noRollout("a delete and re-create with identical data", func() *corev1.Secret {
		if err := clientset().CoreV1().Secrets(ns).Delete(testContext(t), "s", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ns, "app", eventRefused, "Secret s not found")
		return createSecret(t, secret(ns, "s", map[string]string{"a": "1", "unused": "y"}))
	})
	if got := c.counter("Deployment", resultRolled, reasonConfigChanged); got != 0 {
		t.Fatalf("rolled counter = %d before any consumed change", got)
	}

	// The one change that matters.
	updateSecret(t, ns, "s", setKey("a", "2"))
	waitReplicaSets(t, ns, "app", 2)
	ev := waitEvent(t, ns, "app", eventRolled, "Secret s key a changed")
	t.Logf("event: %s", ev.Message)
	holds(t, time.Second, "exactly one new ReplicaSet", func() (bool, error) { return replicaSets(t, ns, "app") == 2, nil })
	d := getDeployment(t, ns, "app")
	if stamp := rollout.Stamped(&d.Spec.Template); stamp == "" || stamp != d.Annotations[rollout.AnnotationAppliedHash] {
		t.Fatalf("stamp %q, applied hash %q", stamp, d.Annotations[rollout.AnnotationAppliedHash])
	}
	if d.Annotations[rollout.AnnotationLastRollout] == "" {
		t.Fatal("no last-rollout annotation")
	}
	if got := c.counter("Deployment", resultRolled, reasonConfigChanged); got != 1 {
		t.Fatalf("rolled counter = %d", got)
	}
	if got := c.counter("Deployment", resultAdopted, reasonOptedIn); got != 1 {
		t.Fatalf("adopted counter = %d", got)
	}

	// Opting out leaves the pods (and the stamp) alone and forgets the state.
	stamp := rollout.Stamped(&d.Spec.Template)
	patchAnnotations(t, d, map[string]*string{rollout.AnnotationRolloutOnChange: nil})
	waitFor(t, "the state to be cleared", func() (bool, error) {
		d = getDeployment(t, ns, "app")
		return !hasState(d), nil
	})
	if rollout.Stamped(&d.Spec.Template) != stamp || replicaSets(t, ns, "app") != 2 {
		t.Fatal("opting out rolled the workload")
	}
}

// podTemplate returns a Deployment's pod template as JSON.
func podTemplate(t testing.TB, ns, name string) string {
	t.Helper()
	return string(mustJSON(getDeployment(t, ns, name).Spec.Template))
}

func patchAnnotations(t testing.TB, obj client.Object, kv map[string]*string) {
	t.Helper()
	ann := map[string]any{}
	for k, v := range kv {
		if v == nil {
			ann[k] = nil
		} else {
			ann[k] = *v
		}
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": ann}}
	if err := env.Client().Patch(testContext(t), obj, client.RawPatch(types.MergePatchType, mustJSON(patch))); err != nil {
		t.Fatal(err)
	}
}

// TestTemplateEditIsNotRolledTwice: a user's pod-template edit that starts
// consuming another Secret rolls the workload once (the edit itself); the
// controller records the new baseline without a second rollout (wave#111).
func TestTemplateEditIsNotRolledTwice(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	createSecret(t, secret(ns, "extra", map[string]string{"b": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))
	startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")
	waitFor(t, "the adoption to be observed", func() (bool, error) {
		d := getDeployment(t, ns, "app")
		return d.Status.ObservedGeneration == d.Generation, nil
	})
	d := getDeployment(t, ns, "app")
	before := d.Annotations[rollout.AnnotationAppliedHash]

	d.Spec.Template.Spec.Containers[0].Env = append(d.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "B",
		ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Key: "b"}}})
	if err := env.Client().Update(testContext(t), d); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new baseline", func() (bool, error) {
		d = getDeployment(t, ns, "app")
		return d.Annotations[rollout.AnnotationAppliedHash] != before, nil
	})
	// The deployment controller makes the edit's ReplicaSet on its own time
	// (possibly after the controller recorded the baseline): wait for it, then
	// check that no second rollout follows.
	waitReplicaSets(t, ns, "app", 2)
	holds(t, time.Second, "one rollout (the user's edit)", func() (bool, error) { return replicaSets(t, ns, "app") == 2, nil })
	if rollout.Stamped(&d.Spec.Template) != "" {
		t.Fatal("the controller stamped the template after a user edit")
	}
	// The new reference is watched: changing it rolls.
	updateSecret(t, ns, "extra", setKey("b", "2"))
	waitReplicaSets(t, ns, "app", 3)
	waitEvent(t, ns, "app", eventRolled, "Secret extra key b changed")
}

// TestFlapping: a Secret changing every 200 ms for 30 s, with a minimum
// interval of 10 s set by annotation, gives at most 4 rollouts, and the last one
// carries the final content.
func TestFlapping(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "0"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), with(optIn, rollout.AnnotationMinInterval, "10s")))
	o := testOptions()
	o.MinInterval = time.Hour // the annotation overrides it
	c := startController(t, ns, o)
	waitAdopted(t, ns, "app")

	// A change every 200 ms for 30 s: 150 changes, the last one 29.8 s after
	// the first (fewer if the API server is slow, never later).
	start := time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	changes := 0
	for i := 1; i <= 150 && time.Since(start) < 29800*time.Millisecond; i++ {
		updateSecret(t, ns, "s", setKey("a", fmt.Sprint(i)))
		changes++
		<-tick.C
	}
	t.Logf("%d changes in %s", changes, time.Since(start).Round(time.Millisecond))

	// The last change is applied at the end of its interval.
	var d *appsv1.Deployment
	waitForWithin(t, 25*time.Second, "the final content to be rolled out", func() (bool, error) {
		d = getDeployment(t, ns, "app")
		return c.digested(rollout.KindSecret, "s", mustGetSecret(t, ns, "s").ResourceVersion) &&
			len(pendingChanges(t, c, d)) == 0, nil
	})
	holds(t, time.Second, "no further rollout", func() (bool, error) { return getDeployment(t, ns, "app").Generation == d.Generation, nil })
	rollouts := replicaSets(t, ns, "app") - 1
	t.Logf("%d rollouts for %d changes in 30 s", rollouts, changes)
	if rollouts > 4 || rollouts < 2 {
		t.Fatalf("%d rollouts, want at most 4 (and more than one: the interval coalesces, it does not stop)", rollouts)
	}
	if got := c.counter("Deployment", resultRolled, reasonConfigChanged); got != rollouts {
		t.Errorf("rolled counter %d, ReplicaSets say %d", got, rollouts)
	}
	// One deferral Event per interval, not one per change.
	if n := len(events(t, ns, "app", eventDeferred)); n > 4 {
		t.Errorf("%d deferral Events for %d intervals", n, rollouts)
	}
}

func mustGetSecret(t testing.TB, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := clientset().CoreV1().Secrets(ns).Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pendingChanges computes, as the controller does, the changes the workload
// has not rolled out yet.
func pendingChanges(t testing.TB, c *running, d *appsv1.Deployment) []state.Change {
	t.Helper()
	cfg, err := rollout.Compute(d.Namespace, rollout.PodSpecRefs(&d.Spec.Template.Spec), c.ctl.view.Store().Lookup(testContext(t), d.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	return state.Of(d.Annotations).Changes(cfg)
}

// TestRefusesMissingAndInvalid: a missing key, a missing Secret, or a TLS
// Secret whose key does not match its certificate roll nothing and say why, in
// an Event and a metric; the fix rolls exactly once.
func TestRefusesMissingAndInvalid(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	leaf1, leaf2, wrong := issue(), issue(), issue()
	tlsSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": leaf1.ChainPEM, "tls.key": leaf1.KeyPEM}}
	createSecret(t, tlsSecret)
	createSecret(t, secret(ns, "cfg", map[string]string{"token": "t1"}))
	spec := mountAll("tls")
	spec.Containers[0].Env = envFrom("cfg", "token").Containers[0].Env
	create(t, deployment(ns, "app", 0, spec, optIn))
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")

	// A required key disappears: no rollout, an Event, a metric.
	updateSecret(t, ns, "cfg", func(s *corev1.Secret) { s.Data = map[string][]byte{"other": []byte("x")} })
	ev := waitEvent(t, ns, "app", eventRefused, "Secret cfg has no key token")
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("refusal Event type %s", ev.Type)
	}
	waitFor(t, "the refusal metric", func() (bool, error) {
		return c.counter("Deployment", resultRefused, reason(rollout.ReasonMissingKey)) == 1, nil
	})
	// Back with the same value: nothing to roll.
	s := updateSecret(t, ns, "cfg", setKey("token", "t1"))
	waitFor(t, "the controller to read the fix", func() (bool, error) { return c.digested(rollout.KindSecret, "cfg", s.ResourceVersion), nil })
	holds(t, 500*time.Millisecond, "no rollout", func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })

	// A rotation writes a key that does not match the certificate.
	updateSecret(t, ns, "tls", func(s *corev1.Secret) { s.Data["tls.crt"], s.Data["tls.key"] = leaf2.ChainPEM, wrong.KeyPEM })
	ev = waitEvent(t, ns, "app", eventRefused, "does not match")
	t.Logf("event: %s", ev.Message)
	if c.counter("Deployment", resultRefused, reason(rollout.ReasonInvalidTLS)) != 1 {
		t.Error("no invalid_tls refusal counted")
	}
	holds(t, 500*time.Millisecond, "no rollout into a broken key pair", func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })

	// The second half of the rotation lands: one rollout.
	updateSecret(t, ns, "tls", func(s *corev1.Secret) { s.Data["tls.key"] = leaf2.KeyPEM })
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret tls key tls.crt changed, Secret tls key tls.key changed")

	// The whole Secret goes away: refused.
	if err := clientset().CoreV1().Secrets(ns).Delete(testContext(t), "cfg", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "app", eventRefused, "Secret cfg not found")
	holds(t, 500*time.Millisecond, "no rollout into a missing Secret", func() (bool, error) { return replicaSets(t, ns, "app") == 2, nil })
	if c.counter("Deployment", resultRefused, reason(rollout.ReasonMissingObject)) != 1 {
		t.Error("no missing_object refusal counted")
	}
}

// TestWaitsForPreviousRollout: with a rollout in progress (pods that never
// become ready: there are no nodes), a change is deferred; once the workload
// settles, it rolls.
func TestWaitsForPreviousRollout(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 1, envFrom("s", "a"), optIn))
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")

	updateSecret(t, ns, "s", setKey("a", "2"))
	waitEvent(t, ns, "app", eventDeferred, "waiting for the previous rollout to finish")
	holds(t, time.Second, "no rollout while the previous one runs", func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })
	if c.counter("Deployment", resultDeferred, reasonInProgress) != 1 {
		t.Error("deferral not counted once")
	}
	if got := testutilGauge(c.ctl.metrics.pending.WithLabelValues("Deployment")); got != 1 {
		t.Errorf("pending gauge %v", got)
	}

	d := getDeployment(t, ns, "app")
	d.Spec.Replicas = ptr.To[int32](0)
	if err := env.Client().Update(testContext(t), d); err != nil {
		t.Fatal(err)
	}
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret s key a changed")
	waitFor(t, "the pending gauge to drop", func() (bool, error) {
		return testutilGauge(c.ctl.metrics.pending.WithLabelValues("Deployment")) == 0, nil
	})
}

// TestRestartDuringInterval: a change deferred by the minimum interval is
// applied exactly once, at the end of the interval, even though the controller
// is replaced (a failover through the leader Lease) in the middle of it.
func TestRestartDuringInterval(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), with(optIn, rollout.AnnotationMinInterval, "6s")))
	le := func(o *ctrlOptions) {
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, "hotcert-test", ns
		o.LeaderElectionReleaseOnCancel = true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(3*time.Second), ptr.To(2*time.Second), ptr.To(200*time.Millisecond)
	}
	first := startController(t, ns, testOptions(), le)
	waitAdopted(t, ns, "app")

	updateSecret(t, ns, "s", setKey("a", "2"))
	waitReplicaSets(t, ns, "app", 2)
	last := parseTime(t, getDeployment(t, ns, "app").Annotations[rollout.AnnotationLastRollout])

	updateSecret(t, ns, "s", setKey("a", "3"))
	waitEvent(t, ns, "app", eventDeferred, "minimum interval")
	first.Stop()
	second := startController(t, ns, testOptions(), le)

	// Nothing before the end of the interval...
	holds(t, time.Until(last.Add(6*time.Second))-300*time.Millisecond, "no rollout inside the interval", func() (bool, error) {
		return replicaSets(t, ns, "app") == 2, nil
	})
	// ...then exactly one.
	waitReplicaSets(t, ns, "app", 3)
	holds(t, 1500*time.Millisecond, "exactly one rollout", func() (bool, error) { return replicaSets(t, ns, "app") == 3, nil })
	d := getDeployment(t, ns, "app")
	if got := parseTime(t, d.Annotations[rollout.AnnotationLastRollout]); got.Sub(last) < 6*time.Second {
		t.Fatalf("rolled %s after the previous rollout, inside the 6s interval", got.Sub(last))
	}
	if second.counter("Deployment", resultRolled, reasonConfigChanged) != 1 {
		t.Error("the new leader did not make the rollout")
	}
}

func parseTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v
}

// TestChangeWhileStopped: a change made while no controller runs is applied
// when one starts, and only to the workload that consumes it.
func TestChangeWhileStopped(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s1", map[string]string{"a": "1"}))
	createSecret(t, secret(ns, "s2", map[string]string{"a": "1"}))
	create(t, deployment(ns, "uses-s1", 0, envFrom("s1", "a"), optIn))
	create(t, deployment(ns, "uses-s2", 0, envFrom("s2", "a"), optIn))
	create(t, deployment(ns, "not-opted-in", 0, envFrom("s1", "a"), nil))
	first := startController(t, ns, testOptions())
	waitAdopted(t, ns, "uses-s1")
	waitAdopted(t, ns, "uses-s2")
	first.Stop()

	updateSecret(t, ns, "s1", setKey("a", "2"))
	s2 := mustGetSecret(t, ns, "s2")
	second := startController(t, ns, testOptions())
	waitReplicaSets(t, ns, "uses-s1", 2)
	waitFor(t, "uses-s2 to be reconciled", func() (bool, error) { return second.digested(rollout.KindSecret, "s2", s2.ResourceVersion), nil })
	holds(t, 500*time.Millisecond, "only uses-s1 rolled", func() (bool, error) {
		return replicaSets(t, ns, "uses-s2") == 1 && replicaSets(t, ns, "not-opted-in") == 1 && replicaSets(t, ns, "uses-s1") == 2, nil
	})
	if second.counter("Deployment", resultRolled, reasonConfigChanged) != 1 {
		t.Error("rolled counter")
	}
}

// TestOptIn100: opting 100 running workloads in rolls none of them.
func TestOptIn100(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "shared", map[string]string{"a": "1", "b": "2"}))
	const n = 100
	for i := range n {
		create(t, deployment(ns, fmt.Sprintf("app-%03d", i), 0, mountAll("shared"), nil))
	}
	c := startController(t, ns, testOptions())
	waitFor(t, "100 ReplicaSets", func() (bool, error) {
		list, err := clientset().AppsV1().ReplicaSets(ns).List(testContext(t), metav1.ListOptions{})
		return err == nil && len(list.Items) == n, err
	})
	for i := range n {
		d := getDeployment(t, ns, fmt.Sprintf("app-%03d", i))
		patchAnnotations(t, d, map[string]*string{rollout.AnnotationRolloutOnChange: ptr.To("true")})
	}
	waitFor(t, "100 adoptions", func() (bool, error) {
		list, err := clientset().AppsV1().Deployments(ns).List(testContext(t), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range list.Items {
			if d.Annotations[rollout.AnnotationAppliedHash] == "" {
				return false, nil
			}
		}
		return true, nil
	})
	list, err := clientset().AppsV1().Deployments(ns).List(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Items {
		// (A Deployment's generation moves with its annotations too: that is no
		// rollout. Its pod template must not move.)
		if rollout.Stamped(&d.Spec.Template) != "" || d.Spec.Template.Annotations != nil {
			t.Fatalf("%s: opting in touched the pod template: %v", d.Name, d.Spec.Template.Annotations)
		}
	}
	rs, err := clientset().AppsV1().ReplicaSets(ns).List(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Items) != n {
		t.Fatalf("%d ReplicaSets for %d Deployments: opting in rolled %d", len(rs.Items), n, len(rs.Items)-n)
	}
	if got := c.counter("Deployment", resultAdopted, reasonOptedIn); got != n {
		t.Errorf("adopted counter %d", got)
	}
	if got := c.counter("Deployment", resultRolled, reasonConfigChanged); got != 0 {
		t.Errorf("rolled counter %d", got)
	}
}

// TestStatefulSetAndDaemonSet: the other two kinds roll once per change
// (counted by the ControllerRevisions the real controllers create), and not on
// adoption.
func TestStatefulSetAndDaemonSet(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	labels := map[string]string{"app": "x"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: envFrom("s", "a")}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sts", Annotations: optIn},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ds", Annotations: optIn},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	create(t, sts)
	create(t, ds)
	c := startController(t, ns, testOptions())
	for _, o := range []client.Object{sts, ds} {
		waitFor(t, "adoption of "+o.GetName(), func() (bool, error) {
			if err := env.Client().Get(testContext(t), client.ObjectKeyFromObject(o), o); err != nil {
				return false, err
			}
			return o.GetAnnotations()[rollout.AnnotationAppliedHash] != "" && controllerRevisions(t, ns, o) == 1, nil
		})
	}
	updateSecret(t, ns, "s", setKey("a", "2"))
	for _, o := range []client.Object{sts, ds} {
		waitFor(t, "a new revision of "+o.GetName(), func() (bool, error) { return controllerRevisions(t, ns, o) == 2, nil })
		waitEvent(t, ns, o.GetName(), eventRolled, "Secret s key a changed")
	}
	holds(t, time.Second, "one revision each", func() (bool, error) {
		return controllerRevisions(t, ns, sts) == 2 && controllerRevisions(t, ns, ds) == 2, nil
	})
	if c.counter("StatefulSet", resultRolled, reasonConfigChanged) != 1 || c.counter("DaemonSet", resultRolled, reasonConfigChanged) != 1 {
		t.Error("rolled counters")
	}
}

// TestGlobalBudget: a change consumed by five workloads, with a budget of two
// rollouts per 3 s, rolls two, defers three, and rolls them as the window
// slides.
func TestGlobalBudget(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "shared", map[string]string{"a": "1"}))
	for i := range 5 {
		create(t, deployment(ns, fmt.Sprintf("app-%d", i), 0, envFrom("shared", "a"), optIn))
	}
	o := testOptions()
	o.MaxRollouts, o.BudgetWindow = 2, 3*time.Second
	c := startController(t, ns, o)
	for i := range 5 {
		waitAdopted(t, ns, fmt.Sprintf("app-%d", i))
	}
	rolled := func() int {
		n := 0
		for i := range 5 {
			n += replicaSets(t, ns, fmt.Sprintf("app-%d", i)) - 1
		}
		return n
	}
	start := time.Now()
	updateSecret(t, ns, "shared", setKey("a", "2"))
	waitFor(t, "two rollouts", func() (bool, error) { return rolled() == 2, nil })
	waitFor(t, "three budget deferrals", func() (bool, error) { return c.counter("Deployment", resultDeferred, reasonBudget) == 3, nil })
	holds(t, time.Until(start.Add(2500*time.Millisecond)), "the budget", func() (bool, error) { return rolled() == 2, nil })
	waitFor(t, "four rollouts", func() (bool, error) { return rolled() == 4, nil })
	waitFor(t, "five rollouts", func() (bool, error) { return rolled() == 5, nil })
	if el := time.Since(start); el < 6*time.Second {
		t.Errorf("5 rollouts at 2 per 3 s took only %s", el)
	}
}

// TestDryRun: a dry-run workload gets an Event and a metric saying what would
// roll, and no write at all.
func TestDryRun(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), with(optIn, rollout.AnnotationDryRun, "true")))
	c := startController(t, ns, testOptions())
	s := mustGetSecret(t, ns, "s")
	waitFor(t, "the first reconcile", func() (bool, error) { return c.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
	rv := getDeployment(t, ns, "app").ResourceVersion

	updateSecret(t, ns, "s", setKey("a", "2"))
	ev := waitEvent(t, ns, "app", eventWouldRoll, "would roll: Secret s key a changed")
	t.Logf("event: %s", ev.Message)
	waitFor(t, "the dry-run metric", func() (bool, error) { return c.counter("Deployment", resultDryRun, reasonConfigChanged) == 1, nil })
	holds(t, 500*time.Millisecond, "no write", func() (bool, error) {
		d := getDeployment(t, ns, "app")
		return d.ResourceVersion == rv && replicaSets(t, ns, "app") == 1, nil
	})

	// The global flag does the same for every workload.
	ns2 := env.NewNamespace(t)
	createSecret(t, secret(ns2, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns2, "app", 0, envFrom("s", "a"), optIn))
	o := testOptions()
	o.DryRun = true
	c2 := startController(t, ns2, o)
	s = mustGetSecret(t, ns2, "s")
	waitFor(t, "the first reconcile", func() (bool, error) { return c2.digested(rollout.KindSecret, "s", s.ResourceVersion), nil })
	updateSecret(t, ns2, "s", setKey("a", "2"))
	waitEvent(t, ns2, "app", eventWouldRoll, "would roll: Secret s key a changed")
	if d := getDeployment(t, ns2, "app"); d.Generation != 1 || hasState(d) {
		t.Fatal("--dry-run wrote to the workload")
	}
}

// TestUnreferencedSecretsAreNeverCached: the controller keeps nothing of the
// Secrets no opted-in workload consumes (Helm release Secrets, say), in either
// memory-bounded mode, and never reads them; the one referenced Secret is
// digested from its watch events (CacheReferenced) or read once per version
// (CacheMetadata).
func TestUnreferencedSecretsAreNeverCached(t *testing.T) {
	t.Parallel()
	for _, mode := range []SecretCache{CacheReferenced, CacheMetadata} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			ns := env.NewNamespace(t)
			createSecret(t, secret(ns, "used", map[string]string{"a": "1"}))
			big := strings.Repeat("x", 512<<10)
			for i := range 5 {
				s := secret(ns, fmt.Sprintf("sh.helm.release.v1.app.v%d", i), map[string]string{"release": big})
				s.Labels = map[string]string{"owner": "helm"}
				s.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: strings.Repeat("y", 100<<10)}
				createSecret(t, s)
			}
			create(t, deployment(ns, "app", 0, envFrom("used", "a"), optIn))
			o := testOptions()
			o.SecretCache = mode
			c := startController(t, ns, o)
			waitAdopted(t, ns, "app")
			for i := range 5 {
				updateSecret(t, ns, fmt.Sprintf("sh.helm.release.v1.app.v%d", i), setKey("release", big+"y"))
			}
			updateSecret(t, ns, "used", setKey("a", "2"))
			waitReplicaSets(t, ns, "app", 2)
			reads := int(testutilCounter(c.ctl.metrics.reads.WithLabelValues("Secret")))
			t.Logf("%s: %d Secret reads from the API server", mode, reads)
			switch {
			case mode == CacheReferenced && reads != 0:
				t.Errorf("%d Secret reads: the watch brings the data", reads)
			case mode == CacheMetadata && reads > 2:
				t.Errorf("%d Secret reads for 2 versions of the one referenced Secret", reads)
			}
			if keys := c.ctl.view.Store().Keys(rollout.KindSecret, ns); len(keys) != 1 || keys[0].Name != "used" {
				t.Errorf("the controller keeps %v, want only the referenced Secret", keys)
			}
			// The referenced Secret is kept as digests, not data.
			if o := c.ctl.view.Store().Current(clusterview.Key{Kind: rollout.KindSecret, Namespace: ns, Name: "used"}); o == nil || len(o.Keys) != 1 {
				t.Errorf("digest of the referenced Secret: %+v", o)
			}
		})
	}
}

// TestWaitTimeout: a previous rollout that never finishes delays a change by
// at most the wait timeout.
func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 1, envFrom("s", "a"), optIn)) // never ready: there are no nodes
	o := testOptions()
	o.RolloutWaitTimeout = 2 * time.Second
	startController(t, ns, o)
	waitAdopted(t, ns, "app")
	start := time.Now()
	updateSecret(t, ns, "s", setKey("a", "2"))
	waitEvent(t, ns, "app", eventDeferred, "waiting for the previous rollout to finish")
	waitReplicaSets(t, ns, "app", 2)
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("rolled after %s, inside the 2s wait timeout", el)
	}
}
