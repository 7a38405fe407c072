package controller

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
)

// startWebhook runs the controller's admission webhook server on loopback,
// with a certificate from a fresh CA, and registers it for UPDATEs of
// Deployments in ns (failurePolicy Ignore, as deployed).
func startWebhook(t *testing.T, ns string) {
	t.Helper()
	ca, crt, key := servingKeyPair(t)
	ws, err := newWebhookServer("127.0.0.1:0", crt, key, Options{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	ws.ready = make(chan net.Addr, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ws.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	var addr net.Addr
	select {
	case addr = <-ws.ready:
	case err := <-done:
		t.Fatalf("webhook server: %v", err)
	}
	url := "https://" + addr.String() + "/mutate"
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hotcert-keep-stamp-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "keep-stamp.hotcert.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.CertPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	if err := env.Client().Create(testContext(t), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), cfg) })

	// The API server picks the configuration up asynchronously: wait until a
	// stamp on a probe survives an owner's reset.
	create(t, deployment(ns, "probe", 0, envFrom("none"), nil))
	waitFor(t, "the API server calling the webhook", func() (bool, error) {
		ctx := testContext(t)
		d := &appsv1.Deployment{}
		if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe"}, d); err != nil {
			return false, err
		}
		if rollout.Stamped(&d.Spec.Template) != "probe" {
			orig := d.DeepCopy()
			rollout.Stamp(&d.Spec.Template, "probe")
			if err := env.Client().Patch(ctx, d, client.MergeFrom(orig), client.FieldOwner(rollout.FieldManager)); err != nil {
				return false, err
			}
		}
		if err := resetAnnotations(ctx, ns, "probe", true); err != nil {
			return false, err
		}
		if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe"}, d); err != nil {
			return false, err
		}
		return rollout.Stamped(&d.Spec.Template) == "probe", nil
	})
}

// servingKeyPair writes a serving certificate (for localhost and 127.0.0.1)
// and its key to files, and returns its CA and the files.
func servingKeyPair(t testing.TB) (ca *hotcerttest.CA, crt, key string) {
	t.Helper()
	ca = hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	dir := t.TempDir()
	crt, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(crt, leaf.ChainPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, crt, key
}

// resetAnnotations is an owner controller's reconcile, as kagent's: it writes
// its pod template's annotations (and, if metadata, the Deployment's) as it
// wants them, dropping any other.
func resetAnnotations(ctx context.Context, ns, name string, metadata bool) error {
	d := &appsv1.Deployment{}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	if metadata {
		d.Annotations = map[string]string{"owner": "1"}
	}
	d.Spec.Template.Annotations = map[string]string{"owner": "1"}
	return env.Client().Update(ctx, d, client.FieldOwner("owner-controller"))
}

// templateChanges counts, from a watch, how many times each Deployment of ns
// got a new pod template: each is a rollout (or a rollback).
func templateChanges(t *testing.T, ns string) func(name string) int {
	t.Helper()
	w, err := clientset().AppsV1().Deployments(ns).Watch(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	last, changes := map[string]string{}, map[string]int{}
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			b, _ := json.Marshal(d.Spec.Template)
			mu.Lock()
			if prev, seen := last[d.Name]; seen && prev != string(b) {
				changes[d.Name]++
			}
			last[d.Name] = string(b)
			mu.Unlock()
		}
	}()
	return func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return changes[name]
	}
}

// TestOwnerControllerResettingAnnotationsDoesNotUndoRollouts: an owner
// controller writes its Deployment's annotations and pod-template annotations
// on every reconcile, dropping the stamp and the controller's state. With the
// controller's webhook registered, a CA rotation is exactly one rollout while
// the owner keeps rewriting. Without it (a control namespace, where the owner
// drops only the pod template's annotations), the owner's next write takes
// the stamp back off: a second rollout that undoes the first.
func TestOwnerControllerResettingAnnotationsDoesNotUndoRollouts(t *testing.T) {
	t.Parallel()
	kagentRules(t)
	guarded, plain := env.NewNamespace(t), env.NewNamespace(t)
	startWebhook(t, guarded)
	ca := func() string { return string(hotcerttest.MustNewCA().CertPEM) }
	changes := map[string]func(string) int{}
	for _, ns := range []string{guarded, plain} {
		changes[ns] = templateChanges(t, ns)
		createSecret(t, secret(ns, "ca", map[string]string{"ca.crt": ca()}))
		createCR(t, modelConfigs, "ModelConfig", ns, "default-model-config", map[string]any{"tls": map[string]any{"caCertSecretRef": "ca"}})
		agentDeployment(t, ns, "agent", "", envFrom("none"))
	}

	// The owner, reconciling all the time.
	ctx, cancel := context.WithCancel(testContext(t))
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, ns := range []string{guarded, plain} {
		wg.Go(func() {
			for ctx.Err() == nil {
				_ = resetAnnotations(ctx, ns, "agent", ns == guarded) // a conflict is retried next round
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	// The owner's own first write is a template change: count from after it.
	base := map[string]int{}
	for _, ns := range []string{guarded, plain} {
		waitFor(t, "the owner's first write", func() (bool, error) {
			return getDeployment(t, ns, "agent").Spec.Template.Annotations["owner"] == "1" && changes[ns]("agent") == 1, nil
		})
		base[ns] = changes[ns]("agent")
	}

	o := testOptions()
	o.ReferenceRules = true
	startControllerIn(t, env.Config(), []string{guarded, plain}, o)
	waitAdopted(t, guarded, "agent")
	waitEvent(t, plain, "agent", eventAdopted, "nothing restarted")

	for i := 1; i <= 2; i++ {
		for _, ns := range []string{guarded, plain} {
			updateSecret(t, ns, "ca", setKey("ca.crt", ca()))
		}
		waitFor(t, "the rollout of the guarded agent", func() (bool, error) { return changes[guarded]("agent") == base[guarded]+i, nil })
		holds(t, 3*time.Second, "one rollout per rotation under an owner rewriting the annotations", func() (bool, error) {
			return changes[guarded]("agent") == base[guarded]+i, nil
		})
		d := getDeployment(t, guarded, "agent")
		if rollout.Stamped(&d.Spec.Template) == "" || d.Spec.Template.Annotations["owner"] != "1" || d.Annotations[rollout.AnnotationAppliedHash] == "" {
			t.Fatalf("rotation %d: template annotations %v, annotations %v: want the stamp, the owner's annotation and the recorded state", i, d.Spec.Template.Annotations, d.Annotations)
		}
	}
	// The control: each rollout was undone by the owner's next write.
	waitFor(t, "the owner undoing the unguarded rollouts", func() (bool, error) { return changes[plain]("agent") >= base[plain]+4, nil })
	if d := getDeployment(t, plain, "agent"); rollout.Stamped(&d.Spec.Template) != "" {
		t.Fatalf("unguarded: the stamp survived the owner (%v); the control does not show what the webhook prevents", d.Spec.Template.Annotations)
	}
}

// TestStateRemovedByAnotherWriterIsReported: when another writer removes the
// state annotations of an adopted workload (an owner controller without the
// webhook), the controller adopts it again, restarts nothing, and says so
// with a Warning Event naming the fix and a metric.
func TestStateRemovedByAnotherWriterIsReported(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))
	waitReplicaSets(t, ns, "app", 1)
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")
	if got := c.counter("Deployment", resultAdopted, reasonStateRemoved); got != 0 {
		t.Fatalf("state_removed before any removal: %d", got)
	}

	// The owner's view: its own annotations only (retried: the deployment
	// controller writes the status meanwhile).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := getDeployment(t, ns, "app")
		d.Annotations = optIn
		return env.Client().Update(testContext(t), d, client.FieldOwner("owner-controller"))
	}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "app", eventStateRemoved, "deploy the controller's admission webhook")
	waitAdopted(t, ns, "app")
	if got := c.counter("Deployment", resultAdopted, reasonStateRemoved); got != 1 {
		t.Fatalf("state_removed: %d, want 1", got)
	}
	rolloutsAre(t, ns, map[string]int{"app": 0})

	// An owner that keeps removing it, every 50 ms for 5 s: the controller
	// backs off (1 s, 2 s, 4 s, ...) instead of answering every removal with
	// a write.
	ctx, cancel := context.WithTimeout(testContext(t), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := getDeployment(t, ns, "app")
			if d.Annotations[rollout.AnnotationAppliedHash] == "" {
				return nil
			}
			d.Annotations = optIn
			return env.Client().Update(ctx, d, client.FieldOwner("owner-controller"))
		})
		time.Sleep(50 * time.Millisecond)
	}
	if got := c.counter("Deployment", resultAdopted, reasonStateRemoved); got < 2 || got > 5 {
		t.Fatalf("state_removed after 5 s of removals every 50 ms: %d, want a few (backed off), not one per removal", got)
	} else {
		t.Logf("5 s of removals every 50 ms: %d re-adoptions", got)
	}
	rolloutsAre(t, ns, map[string]int{"app": 0})
}
