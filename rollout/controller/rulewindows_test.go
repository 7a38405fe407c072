package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// nightlies is a declared kind only TestReferenceRuleWindowsDeferADeclaredKind
// registers, with a rule of its own: the windows of that rule reach no
// workload of another test (the cluster-wide rules are shared by the whole
// test binary).
var nightlies = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "nightlies"}

const nightlyCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: nightlies.example.dev}
spec:
  group: example.dev
  names: {kind: Nightly, listKind: NightlyList, plural: nightlies, singular: nightly}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              restartAt: {type: string, format: date-time}
              template: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

const nightlyRule = "test-nightly-windows"

func getNightly(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn(t).Resource(nightlies).Namespace(ns).Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func nightlyRestartAt(t testing.TB, ns, name string) string {
	t.Helper()
	at, _, _ := unstructured.NestedString(getNightly(t, ns, name).Object, "spec", "restartAt")
	return at
}

// TestReferenceRuleWindowsDeferADeclaredKind: a ReferenceRule declares a kind
// (spec.rollout with restartAt) and gives it a Saturday 02:00 Europe/Berlin
// window (spec.rolloutWindows); the workload and its Namespace say nothing.
// A change outside the window is deferred, the rule named as the windows'
// source, and recorded (rollout-pending); a controller started just before
// the window sets spec.restartAt at its start, once. Then a rotate-now token,
// outside the window, sets spec.restartAt again, once, and is recorded.
func TestReferenceRuleWindowsDeferADeclaredKind(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	for _, o := range kubetest.DecodeYAML(t, []byte(nightlyCRD)) {
		if err := env.Client().Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating the Nightly CRD: %v", err)
		}
	}
	waitFor(t, "the Nightly CRD served", func() (bool, error) {
		_, err := dyn(t).Resource(nightlies).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	const windows = "CRON_TZ=Europe/Berlin 0 2 * * SAT"
	rule := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hotcert.dev/v1alpha1", "kind": "ReferenceRule",
		"metadata": map[string]any{"name": nightlyRule},
		"spec": map[string]any{
			"target":         map[string]any{"group": "example.dev", "version": "v1", "kind": "Nightly"},
			"rollout":        map[string]any{"podTemplate": "spec.template", "restartAt": "spec.restartAt"},
			"rolloutWindows": []any{map[string]any{"schedule": windows, "duration": "1h"}},
		},
	}}
	if _, err := dyn(t).Resource(referenceRules).Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn(t).Resource(referenceRules).Delete(testContext(t), nightlyRule, metav1.DeleteOptions{})
	})

	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "creds", map[string]string{"token": "t1"}))
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{Spec: envFrom("creds", "token")})
	if err != nil {
		t.Fatal(err)
	}
	nightly := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.dev/v1", "kind": "Nightly",
		"metadata": map[string]any{"namespace": ns, "name": "batch", "annotations": map[string]any{rollout.AnnotationRolloutOnChange: "true"}},
		"spec":     map[string]any{"template": tmpl},
	}}
	if _, err := dyn(t).Resource(nightlies).Namespace(ns).Create(ctx, nightly, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	start := berlin(t, "2026-12-05 02:00:00") // a Saturday: 01:00 UTC
	clk := clockAt(start.Add(-3 * time.Hour))
	o := testOptions()
	o.ReferenceRules = true
	o.Clock = clk
	first := startController(t, ns, o)
	waitFor(t, "ReferenceRule "+nightlyRule+" Ready", func() (bool, error) {
		cond := ruleCondition(t, nightlyRule, v1alpha1.ConditionReady)
		return cond != nil && cond.Status == metav1.ConditionTrue, nil
	})
	waitEvent(t, ns, "batch", eventAdopted, "nothing restarted")

	updateSecret(t, ns, "creds", setKey("token", "t2"))
	ev := waitEvent(t, ns, "batch", eventDeferred, "deferred (outside_window)")
	for _, want := range []string{"Secret creds key token changed", "ReferenceRule " + nightlyRule, windows + " for 1h", "rolling at 2026-12-05T01:00:00Z"} {
		if !strings.Contains(ev.Message, want) {
			t.Errorf("deferral Event %q lacks %q", ev.Message, want)
		}
	}
	if got := first.counter("Nightly", resultDeferred, reasonOutsideWindow); got != 1 {
		t.Errorf("deferred/outside_window counted %d times, want 1", got)
	}
	waitFor(t, "the pending annotation", func() (bool, error) {
		p := getNightly(t, ns, "batch").GetAnnotations()[rollout.AnnotationRolloutPending]
		return strings.Contains(p, "rolls-at=2026-12-05T01:00:00Z") && strings.Contains(p, "reason=outside_window"), nil
	})
	first.Stop()
	if at := nightlyRestartAt(t, ns, "batch"); at != "" {
		t.Fatalf("rolled outside the rule's window: spec.restartAt %s", at)
	}

	clk.set(start.Add(-2 * time.Second))
	second := startController(t, ns, o)
	holds(t, clk.untilShifted(start)-300*time.Millisecond, "no rollout before the window opens", func() (bool, error) {
		return nightlyRestartAt(t, ns, "batch") == "", nil
	})
	waitEvent(t, ns, "batch", eventRolled, "Secret creds key token changed")
	at := parseTime(t, nightlyRestartAt(t, ns, "batch"))
	if at.Before(start) || at.After(start.Add(30*time.Second)) {
		t.Errorf("spec.restartAt %s, want the window's start %s", at, start)
	}
	if v, ok := getNightly(t, ns, "batch").GetAnnotations()[rollout.AnnotationRolloutPending]; ok {
		t.Errorf("pending annotation %q left after the rollout", v)
	}
	holds(t, time.Second, "one rollout", func() (bool, error) {
		return len(events(t, ns, "batch", eventRolled)) == 1, nil
	})
	if got := second.counter("Nightly", resultRolled, reasonConfigChanged); got != 1 {
		t.Errorf("rolled %d times", got)
	}

	// Rotate-now on the declared kind, after the window closed: restartAt
	// is written again, once, and the token recorded.
	second.Stop()
	clk.set(start.Add(2 * time.Hour))
	third := startController(t, ns, o)
	rolledAt := nightlyRestartAt(t, ns, "batch")
	patch := `{"metadata":{"annotations":{"` + rollout.AnnotationRotateNow + `":"ticket-42"}}}`
	if _, err := dyn(t).Resource(nightlies).Namespace(ns).Patch(ctx, "batch", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "batch", eventRolled, `rotate-now requested (hotcert.dev/rotate-now="ticket-42")`)
	got := getNightly(t, ns, "batch")
	now, _, _ := unstructured.NestedString(got.Object, "spec", "restartAt")
	if now == rolledAt || parseTime(t, now).Before(start.Add(2*time.Hour)) {
		t.Errorf("spec.restartAt %s after rotate-now (was %s), want the controller's now", now, rolledAt)
	}
	if tok := got.GetAnnotations()[rollout.AnnotationRotated]; tok != "ticket-42" {
		t.Errorf("rotated %q, want ticket-42", tok)
	}
	if h, _, _ := unstructured.NestedString(got.Object, "spec", "template", "metadata", "annotations", rollout.AnnotationConfigHash); h != "" {
		t.Errorf("with restartAt, the pod template was stamped too (%s)", h)
	}
	holds(t, time.Second, "the token rolls once", func() (bool, error) {
		return nightlyRestartAt(t, ns, "batch") == now, nil
	})
	if got := third.counter("Nightly", resultRolled, reasonRotateNow); got != 1 {
		t.Errorf("rolled/rotate_now counted %d, want 1", got)
	}
}
