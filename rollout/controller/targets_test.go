package controller

import (
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
)

var (
	argoRollouts = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	targetsOnce  sync.Once
)

// targetRules installs, once for the package (rules are cluster-wide, one
// per kind), Argo Rollouts' real CRD and the rules of examples/rollout-targets
// as shipped.
func targetRules(t testing.TB) {
	t.Helper()
	targetsOnce.Do(func() {
		ctx := testContext(t)
		crd, err := os.ReadFile("testdata/crds/argoproj.io_rollouts.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range kubetest.DecodeYAML(t, crd) {
			if err := env.Client().Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating the Argo Rollouts CRD: %v", err)
			}
		}
		waitFor(t, "the Rollout CRD served", func() (bool, error) {
			_, err := dyn(t).Resource(argoRollouts).Namespace("default").List(ctx, metav1.ListOptions{})
			return err == nil, nil
		})
		// A test-only rule whose workloads are a declared kind: a Gateway
		// runs the Rollout of its name.
		gatewayRule := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "hotcert.dev/v1alpha1", "kind": "ReferenceRule",
			"metadata": map[string]any{"name": "test-gateway-rollout"},
			"spec": map[string]any{
				"target":     map[string]any{"group": "example.dev", "version": "v1", "kind": "Gateway"},
				"secretRefs": []any{map[string]any{"name": map[string]any{"path": "spec.tls.secretName"}, "key": map[string]any{"default": "routes"}}},
				"workloads":  map[string]any{"name": "{name}", "kinds": []any{"Rollout"}},
			},
		}}
		for _, f := range []string{"argo-rollout.yaml", "cronjob.yaml", ""} {
			var objs []*unstructured.Unstructured
			if f == "" {
				objs = append(objs, gatewayRule)
			} else {
				data, err := os.ReadFile("../../examples/rollout-targets/" + f)
				if err != nil {
					t.Fatal(err)
				}
				objs = kubetest.DecodeYAML(t, data)
			}
			for _, o := range objs {
				if _, err := dyn(t).Resource(referenceRules).Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("creating ReferenceRule %s from %s: %v", o.GetName(), f, err)
				}
			}
		}
	})
}

// argoRollout is a Rollout as a user writes it: opted in, its pod template
// consuming key of Secret secretName.
func argoRollout(ns, name, secretName, key string) *unstructured.Unstructured {
	spec := envFrom(secretName, key)
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec:       spec,
	})
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"namespace": ns, "name": name, "annotations": map[string]any{rollout.AnnotationRolloutOnChange: "true"}},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": tmpl,
			"strategy": map[string]any{"canary": map[string]any{}},
		},
	}}
}

func getRollout(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn(t).Resource(argoRollouts).Namespace(ns).Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// setRolloutStatus writes the status Argo Rollouts would: it has observed the
// current generation and is in phase.
func setRolloutStatus(t testing.TB, ns, name, phase string) {
	t.Helper()
	waitFor(t, "the Rollout's status written", func() (bool, error) {
		u := getRollout(t, ns, name)
		u.Object["status"] = map[string]any{
			"observedGeneration": strconv.FormatInt(u.GetGeneration(), 10), // a string in Argo Rollouts' status
			"phase":              phase,
		}
		_, err := dyn(t).Resource(argoRollouts).Namespace(ns).UpdateStatus(testContext(t), u, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// The Argo Rollouts rule as shipped: a change sets spec.restartAt once (and
// stamps nothing into spec.template), a second change waits while the
// Rollout's status says it is progressing, and rolls once it is healthy.
func TestDeclaredKindArgoRollout(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "creds", map[string]string{"token": "t1", "other": "o1"}))
	if _, err := dyn(t).Resource(argoRollouts).Namespace(ns).Create(testContext(t), argoRollout(ns, "web", "creds", "token"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setRolloutStatus(t, ns, "web", "Healthy")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	o := testOptions()
	o.ReferenceRules = true
	o.Clock = clk
	c := startController(t, ns, o)

	waitEvent(t, ns, "web", eventAdopted, "nothing restarted")
	adopted := getRollout(t, ns, "web")
	if _, found, _ := unstructured.NestedString(adopted.Object, "spec", "restartAt"); found {
		t.Fatal("adopting set spec.restartAt")
	}

	// A key the Rollout does not consume: nothing.
	updateSecret(t, ns, "creds", setKey("other", "o2"))
	// The consumed key: one restart.
	clk.SetTime(clk.Now().Add(time.Minute))
	updateSecret(t, ns, "creds", setKey("token", "t2"))
	waitEvent(t, ns, "web", eventRolled, "rolled: Secret creds")
	first := getRollout(t, ns, "web")
	restartAt, _, _ := unstructured.NestedString(first.Object, "spec", "restartAt")
	if want := clk.Now().UTC().Format(time.RFC3339); restartAt != want {
		t.Fatalf("spec.restartAt = %q, want %q (the controller's clock)", restartAt, want)
	}
	if h, _, _ := unstructured.NestedString(first.Object, "spec", "template", "metadata", "annotations", rollout.AnnotationConfigHash); h != "" {
		t.Errorf("with restartAt, the pod template was stamped too (%s)", h)
	}
	if n := c.counter("Rollout", resultRolled, reasonConfigChanged); n != 1 {
		t.Fatalf("%d rollouts counted for kind Rollout, want 1", n)
	}

	// Argo Rollouts picks the restart up: progressing.
	setRolloutStatus(t, ns, "web", "Progressing")
	clk.SetTime(clk.Now().Add(time.Minute))
	updateSecret(t, ns, "creds", setKey("token", "t3"))
	waitEvent(t, ns, "web", eventDeferred, "waiting for the previous rollout to finish (the readiness expression")
	if got, _, _ := unstructured.NestedString(getRollout(t, ns, "web").Object, "spec", "restartAt"); got != restartAt {
		t.Fatalf("rolled while the Rollout was progressing: restartAt %s, was %s", got, restartAt)
	}
	if n := c.counter("Rollout", resultDeferred, reasonInProgress); n != 1 {
		t.Fatalf("%d deferrals counted (in_progress), want 1", n)
	}

	// Done: the waiting change rolls, once.
	setRolloutStatus(t, ns, "web", "Healthy")
	waitFor(t, "the second restart", func() (bool, error) {
		got, _, _ := unstructured.NestedString(getRollout(t, ns, "web").Object, "spec", "restartAt")
		return got == clk.Now().UTC().Format(time.RFC3339), nil
	})
	waitFor(t, "two rollouts counted", func() (bool, error) {
		return c.counter("Rollout", resultRolled, reasonConfigChanged) == 2, nil
	})
	if n := len(events(t, ns, "web", eventRolled)); n != 2 {
		t.Fatalf("%d Rolled Events, want 2", n)
	}
}

// A Rollout that runs a Deployment's pods (spec.workloadRef) has no
// spec.template: the rule's path is absent, which a Warning Event says;
// nothing is written.
func TestDeclaredKindWithoutThePodTemplate(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	ro := argoRollout(ns, "by-ref", "creds", "token")
	unstructured.RemoveNestedField(ro.Object, "spec", "template")
	ro.Object["spec"].(map[string]any)["workloadRef"] = map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
	created, err := dyn(t).Resource(argoRollouts).Namespace(ns).Create(testContext(t), ro, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.ReferenceRules = true
	c := startController(t, ns, o)
	e := waitEvent(t, ns, "by-ref", eventRefused, "Rollout has no pod template at spec.template (rule argo-rollouts)")
	if e.Type != corev1.EventTypeWarning {
		t.Errorf("%s Event, want Warning", e.Type)
	}
	if n := c.counter("Rollout", resultRefused, reasonNoPodTemplate); n != 1 {
		t.Errorf("%d refusals counted (no_pod_template), want 1", n)
	}
	if got := getRollout(t, ns, "by-ref"); got.GetResourceVersion() != created.GetResourceVersion() {
		t.Fatalf("the Rollout was written: %v", got.GetAnnotations())
	}
}

// The CronJob rule as shipped: a change stamps the Job template's pod
// template, and a Job created from the CronJob afterwards — as `kubectl create
// job --from=cronjob/…` does, since the cron controller's minute granularity
// would make the test wait for the clock — runs pods, created by the real job
// controller, that carry the new hash.
func TestDeclaredKindCronJob(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "db", map[string]string{"password": "p1"}))
	spec := envFrom("db", "password")
	spec.RestartPolicy = corev1.RestartPolicyNever
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup", Annotations: map[string]string{rollout.AnnotationRolloutOnChange: "true"}},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			Suspend:  ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: spec},
			}},
		},
	}
	create(t, cj)
	o := testOptions()
	o.ReferenceRules = true
	c := startController(t, ns, o)
	waitEvent(t, ns, "backup", eventAdopted, "nothing restarted")
	updateSecret(t, ns, "db", setKey("password", "p2"))
	waitEvent(t, ns, "backup", eventRolled, "rolled: Secret db")
	got := &batchv1.CronJob{}
	if err := env.Client().Get(testContext(t), client.ObjectKeyFromObject(cj), got); err != nil {
		t.Fatal(err)
	}
	hash := got.Spec.JobTemplate.Spec.Template.Annotations[rollout.AnnotationConfigHash]
	if hash == "" || hash != got.Annotations[rollout.AnnotationAppliedHash] {
		t.Fatalf("job template stamped %q, applied hash %q", hash, got.Annotations[rollout.AnnotationAppliedHash])
	}
	if n := c.counter("CronJob", resultRolled, reasonConfigChanged); n != 1 {
		t.Fatalf("%d rollouts counted for kind CronJob, want 1", n)
	}

	// kubectl create job --from=cronjob/backup manual
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "manual",
			Annotations:     map[string]string{"cronjob.kubernetes.io/instantiate": "manual"},
			Labels:          got.Spec.JobTemplate.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(got, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: got.Spec.JobTemplate.Spec,
	}
	create(t, job)
	waitFor(t, "the job controller's pod", func() (bool, error) {
		var pods corev1.PodList
		if err := env.Client().List(testContext(t), &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": "manual"}); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Annotations[rollout.AnnotationConfigHash] != hash {
				t.Fatalf("pod %s has config hash %q, want %q", p.Name, p.Annotations[rollout.AnnotationConfigHash], hash)
			}
		}
		return len(pods.Items) > 0, nil
	})
}

var gateways = schema.GroupVersionResource{Group: "example.dev", Version: "v1", Resource: "gateways"}

// A chain reaches a declared kind: a Gateway names a Secret and runs the
// Rollout of its name (a rule's workloads: {name, kinds: [Rollout]}), which
// is not opted in itself; the Secret's change restarts it.
func TestChainReachesDeclaredKind(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "gw-tls", map[string]string{"routes": "r1", "notes": "n1"}))
	createCR(t, gateways, "Gateway", ns, "edge", map[string]any{"tls": map[string]any{"secretName": "gw-tls"}})
	ro := argoRollout(ns, "edge", "gw-tls", "routes") // its pods read the routes too
	ro.SetAnnotations(nil)                            // not opted in: the chain reaches it
	if _, err := dyn(t).Resource(argoRollouts).Namespace(ns).Create(testContext(t), ro, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setRolloutStatus(t, ns, "edge", "Healthy")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	o := testOptions()
	o.ReferenceRules = true
	o.Clock = clk
	c := startController(t, ns, o)
	waitEvent(t, ns, "edge", eventAdopted, "Secret gw-tls")
	clk.SetTime(clk.Now().Add(time.Minute))
	updateSecret(t, ns, "gw-tls", setKey("notes", "n2")) // not consumed
	updateSecret(t, ns, "gw-tls", setKey("routes", "r2"))
	waitEvent(t, ns, "edge", eventRolled, "rolled: Secret gw-tls")
	got, _, _ := unstructured.NestedString(getRollout(t, ns, "edge").Object, "spec", "restartAt")
	if want := clk.Now().UTC().Format(time.RFC3339); got != want {
		t.Fatalf("spec.restartAt = %q, want %q", got, want)
	}
	if n := c.counter("Rollout", resultRolled, reasonConfigChanged); n != 1 {
		t.Fatalf("%d rollouts counted, want 1", n)
	}
}

func cronJob(ns, name, secretName, key string, annotations, lbls map[string]string) *batchv1.CronJob {
	spec := envFrom(secretName, key)
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations, Labels: lbls},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			Suspend:  ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{Spec: spec},
			}},
		},
	}
}

func getCronJob(t testing.TB, ns, name string) *batchv1.CronJob {
	t.Helper()
	got := &batchv1.CronJob{}
	if err := env.Client().Get(testContext(t), client.ObjectKey{Namespace: ns, Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// Dry run on a declared kind: the change is reported (WouldRoll, counted),
// nothing is written.
func TestDeclaredKindDryRun(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	db := createSecret(t, secret(ns, "db", map[string]string{"password": "p1"}))
	create(t, cronJob(ns, "report", "db", "password", map[string]string{rollout.AnnotationRolloutOnChange: "true", rollout.AnnotationDryRun: "true"}, nil))
	before := getCronJob(t, ns, "report")
	o := testOptions()
	o.ReferenceRules = true
	c := startController(t, ns, o)
	waitFor(t, "the CronJob looked at", func() (bool, error) { return c.digested(rollout.KindSecret, "db", db.ResourceVersion), nil })
	updateSecret(t, ns, "db", setKey("password", "p2"))
	waitEvent(t, ns, "report", eventWouldRoll, "would roll: Secret db")
	if n := c.counter("CronJob", resultDryRun, reasonConfigChanged); n != 1 {
		t.Fatalf("%d dry-run rollouts counted, want 1", n)
	}
	if got := getCronJob(t, ns, "report"); got.ResourceVersion != before.ResourceVersion {
		t.Fatalf("dry run wrote the CronJob: %v, job template %v", got.Annotations, got.Spec.JobTemplate.Spec.Template.Annotations)
	}
}

// --workload-selector applies to declared kinds too (the cache's default
// label selector narrows their watches): a CronJob outside it is neither
// adopted nor rolled.
func TestDeclaredKindOutsideTheWorkloadSelector(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "db", map[string]string{"password": "p1"}))
	in := map[string]string{rollout.AnnotationRolloutOnChange: "true"}
	create(t, cronJob(ns, "outside", "db", "password", in, map[string]string{"team": "b"}))
	create(t, cronJob(ns, "inside", "db", "password", in, map[string]string{"team": "a"}))
	o := testOptions()
	o.ReferenceRules = true
	o.WorkloadSelector = labels.SelectorFromSet(labels.Set{"team": "a"})
	startController(t, ns, o)
	waitEvent(t, ns, "inside", eventAdopted, "nothing restarted")
	updateSecret(t, ns, "db", setKey("password", "p2"))
	waitEvent(t, ns, "inside", eventRolled, "rolled: Secret db")
	out := getCronJob(t, ns, "outside")
	if h := out.Annotations[rollout.AnnotationAppliedHash]; h != "" || len(events(t, ns, "outside", "")) > 0 {
		t.Fatalf("the CronJob outside the selector was managed: applied hash %q, Events %v", h, events(t, ns, "outside", ""))
	}
	if h := out.Spec.JobTemplate.Spec.Template.Annotations[rollout.AnnotationConfigHash]; h != "" {
		t.Fatalf("the CronJob outside the selector was stamped (%s)", h)
	}
}

// A Rollout that is neither opted in nor reached by a chain is cached as
// metadata only; once opted in, whole.
func TestDeclaredKindUnmanagedIsCachedAsMetadata(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	ro := argoRollout(ns, "plain", "none", "x")
	ro.SetAnnotations(nil)
	if _, err := dyn(t).Resource(argoRollouts).Namespace(ns).Create(testContext(t), ro, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.ReferenceRules = true
	c := startController(t, ns, o)
	cached := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(argoRollouts.GroupVersion().WithKind("Rollout"))
		if err := c.mgr.GetCache().Get(testContext(t), client.ObjectKey{Namespace: ns, Name: "plain"}, u); err != nil {
			return nil
		}
		return u
	}
	waitFor(t, "the Rollout cached", func() (bool, error) { return cached() != nil, nil })
	if u := cached(); u.Object["spec"] != nil || u.GetName() != "plain" {
		t.Fatalf("an unmanaged Rollout is cached with its spec: %v", u.Object)
	}
	createSecret(t, secret(ns, "none", map[string]string{"x": "1"}))
	if _, err := dyn(t).Resource(argoRollouts).Namespace(ns).Patch(testContext(t), "plain", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"hotcert.dev/rollout-on-change":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "plain", eventAdopted, "Secret none")
	waitFor(t, "the opted-in Rollout cached whole", func() (bool, error) {
		u := cached()
		return u != nil && u.Object["spec"] != nil, nil
	})
}

// A declared kind is refused and deferred as a Deployment is: a missing
// Secret refuses, a per-workload minimum interval defers the second change.
func TestDeclaredKindRefusesAndDefers(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"k": "1"}))
	for name, secretName := range map[string]string{"broken": "absent", "paced": "s"} {
		ro := argoRollout(ns, name, secretName, "k")
		ro.SetAnnotations(map[string]string{rollout.AnnotationRolloutOnChange: "true", rollout.AnnotationMinInterval: "1h"})
		if _, err := dyn(t).Resource(argoRollouts).Namespace(ns).Create(testContext(t), ro, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		setRolloutStatus(t, ns, name, "Healthy")
	}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	o := testOptions()
	o.ReferenceRules = true
	o.Clock = clk
	c := startController(t, ns, o)
	waitEvent(t, ns, "broken", eventRefused, "not adopting: Secret absent")
	if n := c.counter("Rollout", resultRefused, reason(rollout.ReasonMissingObject)); n != 1 {
		t.Errorf("%d refusals counted (missing_object), want 1", n)
	}
	waitEvent(t, ns, "paced", eventAdopted, "nothing restarted")
	updateSecret(t, ns, "s", setKey("k", "2"))
	waitEvent(t, ns, "paced", eventRolled, "rolled: Secret s")
	setRolloutStatus(t, ns, "paced", "Healthy")
	clk.SetTime(clk.Now().Add(time.Minute))
	updateSecret(t, ns, "s", setKey("k", "3"))
	waitEvent(t, ns, "paced", eventDeferred, "(minimum interval)")
	if n := c.counter("Rollout", resultDeferred, reasonMinInterval); n != 1 {
		t.Errorf("%d deferrals counted (min_interval), want 1", n)
	}
	if n := len(events(t, ns, "paced", eventRolled)); n != 1 {
		t.Fatalf("%d Rolled Events, want 1", n)
	}
}

// The global budget is one for the built-in and the declared kinds: with room
// for one rollout, a Deployment and a Rollout that consume one Secret roll
// one after the other, not together.
func TestDeclaredKindSharesTheBudget(t *testing.T) {
	t.Parallel()
	targetRules(t)
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "shared", map[string]string{"k": "1"}))
	create(t, deployment(ns, "d", 0, envFrom("shared", "k"), optIn))
	if _, err := dyn(t).Resource(argoRollouts).Namespace(ns).Create(testContext(t), argoRollout(ns, "r", "shared", "k"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setRolloutStatus(t, ns, "r", "Healthy")
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC))
	o := testOptions()
	o.ReferenceRules = true
	o.Clock = clk
	o.MaxRollouts, o.BudgetWindow = 1, time.Hour
	c := startController(t, ns, o)
	waitEvent(t, ns, "d", eventAdopted, "nothing restarted")
	waitEvent(t, ns, "r", eventAdopted, "nothing restarted")
	updateSecret(t, ns, "shared", setKey("k", "2"))
	waitFor(t, "one rolled, the other deferred for the budget", func() (bool, error) {
		rolled := c.counter("Deployment", resultRolled, reasonConfigChanged) + c.counter("Rollout", resultRolled, reasonConfigChanged)
		deferred := c.counter("Deployment", resultDeferred, reasonBudget) + c.counter("Rollout", resultDeferred, reasonBudget)
		if rolled > 1 {
			t.Fatalf("%d rolled with a budget of one", rolled)
		}
		return rolled == 1 && deferred == 1, nil
	})
}
