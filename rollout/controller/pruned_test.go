package controller

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

var canaries = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "canaries"}

// canaryCRD is a workload kind whose schema has spec.restartAt but not
// spec.restartedAt, and prunes unknown fields under spec (as Argo Rollouts'
// CRD does).
const canaryCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: canaries.example.dev}
spec:
  group: example.dev
  names: {kind: Canary, listKind: CanaryList, plural: canaries, singular: canary}
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

// ruleCondition returns the condition of type of ReferenceRule name, nil
// while it has none.
func ruleCondition(t testing.TB, name, typ string) *metav1.Condition {
	t.Helper()
	u, err := dyn(t).Resource(referenceRules).Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var status v1alpha1.ReferenceRuleStatus
	if raw, ok := u.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &status); err != nil {
			t.Fatal(err)
		}
	}
	return meta.FindStatusCondition(status.Conditions, typ)
}

// A declared kind whose rule's restartAt names a field its CRD prunes
// (spec.restartedAt for spec.restartAt): the rule says so at validation (its
// RolloutFieldKept condition, a log line); a change is a refused rollout (a
// Warning Event, the refused count, an error logged, no "rolled"), with
// nothing written. The rule fixed, the same change rolls.
func TestDeclaredKindFieldPrunedBySchema(t *testing.T) {
	t.Parallel()
	targetRules(t) // the Argo Rollouts rule, whose restartAt its CRD keeps
	ctx := testContext(t)
	for _, o := range kubetest.DecodeYAML(t, []byte(canaryCRD)) {
		if err := env.Client().Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating the Canary CRD: %v", err)
		}
	}
	waitFor(t, "the Canary CRD served", func() (bool, error) {
		_, err := dyn(t).Resource(canaries).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
	rule := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hotcert.dev/v1alpha1", "kind": "ReferenceRule",
		"metadata": map[string]any{"name": "test-canary-restartedat"},
		"spec": map[string]any{
			"target":  map[string]any{"group": "example.dev", "version": "v1", "kind": "Canary"},
			"rollout": map[string]any{"podTemplate": "spec.template", "restartAt": "spec.restartedAt"},
		},
	}}
	if _, err := dyn(t).Resource(referenceRules).Create(ctx, rule, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn(t).Resource(referenceRules).Delete(testContext(t), "test-canary-restartedat", metav1.DeleteOptions{})
	})

	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "creds", map[string]string{"token": "t1"}))
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{Spec: envFrom("creds", "token")})
	if err != nil {
		t.Fatal(err)
	}
	canary := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.dev/v1", "kind": "Canary",
		"metadata": map[string]any{"namespace": ns, "name": "web", "annotations": map[string]any{rollout.AnnotationRolloutOnChange: "true"}},
		"spec":     map[string]any{"template": tmpl},
	}}
	if _, err := dyn(t).Resource(canaries).Namespace(ns).Create(ctx, canary, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 14, 0, 0, 0, time.UTC))
	o := testOptions()
	o.ReferenceRules = true
	o.Clock = clk
	c := startController(t, ns, o)

	// At validation: the CRD's schema is read.
	waitFor(t, "the rule's RolloutFieldKept condition False", func() (bool, error) {
		cond := ruleCondition(t, "test-canary-restartedat", v1alpha1.ConditionRolloutFieldKept)
		return cond != nil && cond.Status == metav1.ConditionFalse, nil
	})
	cond := ruleCondition(t, "test-canary-restartedat", v1alpha1.ConditionRolloutFieldKept)
	if cond.Reason != v1alpha1.ReasonPrunedBySchema || !strings.Contains(cond.Message, "canaries.example.dev") || !strings.Contains(cond.Message, "spec.restartedAt") {
		t.Errorf("condition %s %s: %s", cond.Reason, cond.Status, cond.Message)
	}
	if ready := ruleCondition(t, "test-canary-restartedat", v1alpha1.ConditionReady); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Errorf("the rule is not in use: %+v", ready)
	}
	waitFor(t, "the argo-rollouts rule's RolloutFieldKept condition True", func() (bool, error) {
		cond := ruleCondition(t, "argo-rollouts", v1alpha1.ConditionRolloutFieldKept)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == v1alpha1.ReasonInSchema, nil
	})
	if cj := ruleCondition(t, "cronjobs", v1alpha1.ConditionRolloutFieldKept); cj != nil {
		t.Errorf("a built-in kind's rule has a schema condition: %+v", cj)
	}
	// (The condition may come from another test's controller: every one
	// writes the cluster-wide rules' status.)
	waitFor(t, "the pruned field logged at validation", func() (bool, error) {
		logs := c.logs.String()
		return strings.Contains(logs, "writes a field the CRD's schema prunes") && strings.Contains(logs, "rule=test-canary-restartedat"), nil
	})

	// At the rollout: refused, nothing written.
	waitEvent(t, ns, "web", eventAdopted, "nothing restarted")
	before, err := dyn(t).Resource(canaries).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	updateSecret(t, ns, "creds", setKey("token", "t2"))
	e := waitEvent(t, ns, "web", eventRefused, "does not keep Canary's spec.restartedAt")
	if e.Type != corev1.EventTypeWarning {
		t.Errorf("%s Event, want Warning", e.Type)
	}
	if n := c.counter("Canary", resultRefused, reasonFieldPruned); n != 1 {
		t.Errorf("%d refusals counted (field_pruned), want 1", n)
	}
	if n := c.counter("Canary", resultRolled, reasonConfigChanged); n != 0 {
		t.Errorf("%d rollouts counted, want 0", n)
	}
	logs := c.logs.String()
	if !strings.Contains(logs, "level=ERROR msg=\"not rolled: the API server does not keep the field the rollout writes\"") {
		t.Errorf("no error logged for the refused write:\n%s", logs)
	}
	if strings.Contains(logs, "msg=rolled") {
		t.Errorf("logged rolled:\n%s", logs)
	}
	after, err := dyn(t).Resource(canaries).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the Canary was written: annotations %v, spec %v", after.GetAnnotations(), after.Object["spec"])
	}

	// The rule fixed (the field the schema has): the pending change rolls.
	if _, err := dyn(t).Resource(referenceRules).Patch(ctx, "test-canary-restartedat", types.MergePatchType,
		[]byte(`{"spec":{"rollout":{"restartAt":"spec.restartAt"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "web", eventRolled, "rolled: Secret creds")
	got, err := dyn(t).Resource(canaries).Namespace(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if at, _, _ := unstructured.NestedString(got.Object, "spec", "restartAt"); at != clk.Now().UTC().Format(time.RFC3339) {
		t.Errorf("spec.restartAt = %q, want %s", at, clk.Now().UTC().Format(time.RFC3339))
	}
	waitFor(t, "the fixed rule's RolloutFieldKept condition True", func() (bool, error) {
		cond := ruleCondition(t, "test-canary-restartedat", v1alpha1.ConditionRolloutFieldKept)
		return cond != nil && cond.Status == metav1.ConditionTrue, nil
	})
}
