package webhook_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/webhook"
	"github.com/hotcert/hotcert/source/file"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

// serve runs the webhook over TLS with a hot-reloaded certificate (hotcert's
// file source) and returns its URL and CA.
// serve runs the webhook over TLS until the test ends; called receives (without
// blocking: it holds one) whenever the API server calls it.
func serve(t *testing.T, ctx context.Context) (url string, ca *hotcerttest.CA, rotate func(), called <-chan struct{}) {
	t.Helper()
	ca = hotcerttest.MustNewCA()
	dir := t.TempDir()
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func() {
		leaf := ca.MustIssue()
		for path, data := range map[string][]byte{crt: leaf.ChainPEM, key: leaf.KeyPEM} {
			if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Fatal(err)
			}
		}
	}
	write()
	src, err := file.New(file.WithKeyPair(crt, key))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := hotcert.New(ctx, src, hotcert.WithPollInterval(100*time.Millisecond), hotcert.WithSettle(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = rl.Start(ctx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan struct{}, 1)
	h := webhook.Handler()
	notify := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		select {
		case calls <- struct{}{}:
		default:
		}
	})
	srv := &http.Server{Handler: notify, TLSConfig: httptls.ServerConfig(rl), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close(); _ = rl.Close() })
	rotate = func() {
		before := rl.Current().Leaf().SerialNumber.String()
		write()
		deadline := time.Now().Add(10 * time.Second)
		for rl.Current().Leaf().SerialNumber.String() == before {
			if time.Now().After(deadline) {
				t.Fatal("the webhook's certificate was not reloaded")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return "https://" + ln.Addr().String() + "/mutate", ca, rotate, calls
}

func register(t *testing.T, ctx context.Context, url string, ca *hotcerttest.CA, ns string) {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hotcert-keep-stamp-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "keep-stamp.hotcert.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca.CertPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail), // in the test, to be sure it is called
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}
	if err := env.Client().Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), cfg) })
}

func newDeployment(t *testing.T, ctx context.Context, ns, name string) {
	t.Helper()
	sel := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{"owner": "1"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.dev/agent:1"}}},
			},
		},
	}
	if err := env.Client().Create(ctx, d); err != nil {
		t.Fatal(err)
	}
}

// ownerReconcile is an owner controller's reconcile: it resets the pod
// template's annotations to what it wants, every time.
func ownerReconcile(ctx context.Context, c client.Client, ns, name, image string) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	d.Spec.Template.Annotations = map[string]string{"owner": "1"}
	d.Spec.Template.Spec.Containers[0].Image = image
	return c.Update(ctx, d, client.FieldOwner("owner-controller"))
}

// stamperReconcile is a level-triggered rollout controller's reconcile: it
// stamps the template whenever the stamp is not the hash it wants.
func stamperReconcile(ctx context.Context, c client.Client, ns, name, hash string) error {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		return err
	}
	if rollout.Stamped(&d.Spec.Template) == hash {
		return nil
	}
	orig := d.DeepCopy()
	rollout.Stamp(&d.Spec.Template, hash)
	return c.Patch(ctx, d, client.MergeFrom(orig), client.FieldOwner(rollout.FieldManager))
}

// fight runs both reconcilers in loops for a while and returns the
// Deployment's generation: one more per pod-template change, i.e. per rollout.
func fight(t *testing.T, ctx context.Context, ns, name string) int64 {
	t.Helper()
	c := env.Client()
	fctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, loop := range []func() error{
		func() error { return ownerReconcile(fctx, c, ns, name, "example.dev/agent:1") },
		func() error { return stamperReconcile(fctx, c, ns, name, "h1") },
	} {
		wg.Go(func() {
			for fctx.Err() == nil {
				_ = loop() // conflicts are retried by the next round
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	return d.Generation
}

// An owner controller that resets the pod template's annotations on every
// reconcile and a rollout controller that stamps it ping-pong forever; with the
// webhook, the stamp is written once and the owner's resets are no-ops.
func TestWebhookStopsPingPongWithAnOwnerController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, ca, rotate, called := serve(t, ctx)

	// Without the webhook: ping-pong.
	plain := env.NewNamespace(t)
	newDeployment(t, ctx, plain, "agent")
	if gen := fight(t, ctx, plain, "agent"); gen < 10 {
		t.Fatalf("without the webhook, generation %d: expected the two writers to ping-pong", gen)
	} else {
		t.Logf("without the webhook: generation %d after 3s (ping-pong)", gen)
	}

	ns := env.NewNamespace(t)
	register(t, ctx, url, ca, ns)
	// Wait until the API server calls the webhook: it picks a new
	// configuration up asynchronously and says so only by calling it, so the
	// probe is written again until the handler has been called.
	newDeployment(t, ctx, ns, "probe")
	timeout := time.After(30 * time.Second)
	for active := false; !active; {
		if err := stamperReconcile(ctx, env.Client(), ns, "probe", "p"); err != nil {
			t.Fatal(err)
		}
		_ = ownerReconcile(ctx, env.Client(), ns, "probe", "example.dev/agent:1")
		select {
		case <-called:
			active = true
		case <-timeout:
			t.Fatal("the webhook is not called")
		case <-time.After(200 * time.Millisecond): // not called yet: write again
		}
	}
	// Called: from now on the stamp survives the owner's reset.
	if err := stamperReconcile(ctx, env.Client(), ns, "probe", "p"); err != nil {
		t.Fatal(err)
	}
	if err := ownerReconcile(ctx, env.Client(), ns, "probe", "example.dev/agent:1"); err != nil {
		t.Fatal(err)
	}
	probe := &appsv1.Deployment{}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "probe"}, probe); err != nil {
		t.Fatal(err)
	}
	if got := rollout.Stamped(&probe.Spec.Template); got != "p" {
		t.Fatalf("with the webhook called, the owner's reset left stamp %q, want %q", got, "p")
	}

	newDeployment(t, ctx, ns, "agent")
	if gen := fight(t, ctx, ns, "agent"); gen != 2 {
		t.Fatalf("with the webhook, generation %d, want 2 (created, stamped once)", gen)
	}

	// The owner's real changes pass through, the stamp stays; after the
	// webhook's serving certificate rotates (hot reload), too.
	rotate()
	if err := ownerReconcile(ctx, env.Client(), ns, "agent", "example.dev/agent:2"); err != nil {
		t.Fatal(err)
	}
	d := &appsv1.Deployment{}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, d); err != nil {
		t.Fatal(err)
	}
	if img, h := d.Spec.Template.Spec.Containers[0].Image, rollout.Stamped(&d.Spec.Template); img != "example.dev/agent:2" || h != "h1" || d.Generation != 3 {
		t.Fatalf("after the owner's image change: image %s, stamp %q, generation %d; want agent:2, h1, 3", img, h, d.Generation)
	}
	// A new stamp from the rollout controller itself goes through.
	if err := stamperReconcile(ctx, env.Client(), ns, "agent", "h2"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "agent"}, d); err != nil {
		t.Fatal(err)
	}
	if h := rollout.Stamped(&d.Spec.Template); h != "h2" {
		t.Fatalf("the rollout controller's new stamp: got %q", h)
	}
}
