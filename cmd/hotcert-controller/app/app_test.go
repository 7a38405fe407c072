package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app/options"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout"
)

// env is a real etcd, kube-apiserver and kube-controller-manager (Deployments
// get ReplicaSets), shared by this package's tests.
var env *kubetest.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	kubetest.Main(m, &env, kubetest.WithControllerManager(), kubetest.WithCRDPaths("../../../rollout/api/v1alpha1/crd/hotcert.dev_trustrotations.yaml"))
}

// runs numbers the controller processes of this test binary: each gets a
// metrics prefix of its own (controller-runtime's registry is process-wide),
// so the tests run again in one process (-count=2).
var runs atomic.Int32

// start parses args as hotcert-controller does, completes them and runs the
// controller until the test ends; it returns the log and the metrics prefix.
func start(t *testing.T, args ...string) (*testutil.LogBuffer, string) {
	t.Helper()
	logs, prefix, _ := startStoppable(t, args...)
	return logs, prefix
}

// startStoppable is start that also returns a stop: it cancels the controller's
// context, as SIGTERM does, and waits for Run to return nil.
func startStoppable(t *testing.T, args ...string) (*testutil.LogBuffer, string, func()) {
	t.Helper()
	o := options.New()
	fs := pflag.NewFlagSet("hotcert-controller", pflag.ContinueOnError)
	o.AddFlags(fs)
	prefix := fmt.Sprintf("hotcert_app%d", runs.Add(1))
	args = append(args, "--metrics-prefix="+prefix)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.SkipNameValidation = true // other tests in this process run controllers of the same names
	logs := &testutil.LogBuffer{}
	log := logr.FromSlogHandler(slog.NewTextHandler(logs, nil))
	cfg, err := o.Complete(log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, log) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Run did not return")
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("controller log:\n%s", logs)
		}
	})
	return logs, prefix, stop
}

// TestRun runs the controller process from its flags: leader election, health
// and readiness probes, the metrics endpoint with the rollout metrics, a
// rollout, and the admission webhook served over TLS with its certificate's
// metrics.
func TestRun(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	kubeconfig := writeKubeconfig(t, "")
	metricsPort, probePort, webhookPort := testutil.FreePort(t, "127.0.0.1"), testutil.FreePort(t, "127.0.0.1"), testutil.FreePort(t, "127.0.0.1")
	ca, crt, key := servingKeyPair(t)
	createSecret(t, ns, "s", "1")
	createDeployment(t, ns, "app")
	_, prefix := start(t,
		"--kubeconfig", kubeconfig, "--namespace", ns,
		"--leader-election-namespace", ns, "--leader-election-id", "hotcert-run-test",
		"--leader-election-lease-duration=3s", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=200ms",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--min-interval=0",
		fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", webhookPort), "--webhook-cert-file", crt, "--webhook-key-file", key,
	)

	for _, path := range []string{"/healthz", "/readyz"} {
		waitFor(t, path, func() bool {
			code, _ := get(fmt.Sprintf("http://127.0.0.1:%d%s", probePort, path))
			return code == http.StatusOK
		})
	}
	waitAdopted(t, ns, "app")
	waitLease(t, ns, "hotcert-run-test")
	updateSecret(t, ns, "s", "2")
	waitFor(t, "a rollout", func() bool { return stamped(t, ns, "app") })
	waitFor(t, "the rollout metrics", func() bool {
		_, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		return strings.Contains(body, prefix+`_rollouts_total{kind="Deployment",reason="config_changed",result="rolled"} 1`) &&
			strings.Contains(body, prefix+`_rollout_queue_depth{kind="Deployment"}`) &&
			strings.Contains(body, prefix+`_rollout_digested_objects 1`) &&
			strings.Contains(body, prefix+`_tls_cert_not_after_seconds{component="webhook"}`)
	})

	// The webhook answers an AdmissionReview over TLS, with the configured
	// certificate.
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","operation":"CREATE","object":{}}}`
	waitFor(t, "the webhook", func() bool {
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d/mutate", webhookPort), "application/json", strings.NewReader(review))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"uid":"u1","allowed":true`)
	})
}

// TestOutOfCluster runs the controller as from a laptop, with a kubeconfig
// and the default flags (leader election on, no Lease namespace): with a
// namespace in the kubeconfig context, the Lease goes there; without, leader
// election is off, the log says which flag turns it on, and the controller
// works.
func TestOutOfCluster(t *testing.T) {
	t.Parallel()
	t.Run("context namespace", func(t *testing.T) {
		t.Parallel()
		ns := env.NewNamespace(t)
		createSecret(t, ns, "s", "1")
		createDeployment(t, ns, "app")
		logs, _ := start(t, "--kubeconfig", writeKubeconfig(t, ns), "--namespace", ns, "--leader-election-id", "laptop",
			"--metrics-bind-address=0", "--health-probe-bind-address=0")
		waitLease(t, ns, "laptop")
		waitAdopted(t, ns, "app")
		if !strings.Contains(logs.String(), "the leader election Lease goes to the kubeconfig context's namespace") {
			t.Errorf("the log does not say where the Lease went:\n%s", logs)
		}
	})
	t.Run("no context namespace", func(t *testing.T) {
		t.Parallel()
		ns := env.NewNamespace(t)
		createSecret(t, ns, "s", "1")
		createDeployment(t, ns, "app")
		logs, _ := start(t, "--kubeconfig", writeKubeconfig(t, ""), "--namespace", ns, "--leader-election-id", "laptop-no-ns",
			"--metrics-bind-address=0", "--health-probe-bind-address=0")
		waitAdopted(t, ns, "app")
		if !strings.Contains(logs.String(), "leader election is off") || !strings.Contains(logs.String(), "--leader-election-namespace") {
			t.Errorf("the log does not say that leader election is off and which flag turns it on:\n%s", logs)
		}
		leases, err := env.Clientset().CoordinationV1().Leases(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range leases.Items {
			if l.Name == "laptop-no-ns" {
				t.Errorf("a Lease %s/%s with leader election off", l.Namespace, l.Name)
			}
		}
	})
}

// TestStartupErrors: what the controller cannot start with is an error that
// names the flag to fix, before anything runs.
func TestStartupErrors(t *testing.T) {
	short := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--hash-key-file", filepath.Join(t.TempDir(), "missing")}, "--hash-key-file"},
		{[]string{"--hash-key-file", short}, "at least 16 bytes"},
		{[]string{"--webhook-bind-address=127.0.0.1:0", "--webhook-cert-file", short, "--webhook-key-file", short}, "webhook certificate"},
		{[]string{"--kubeconfig", filepath.Join(t.TempDir(), "missing")}, "--kubeconfig"},
		{[]string{"--kubconfig", kubeconfig}, "unknown flag: --kubconfig (did you mean --kubeconfig?)"},
		{[]string{"--leader-election-namspace=x"}, "(did you mean --leader-election-namespace?)"},
	} {
		var stderr bytes.Buffer
		cmd := NewCommand(io.Discard, &stderr)
		args := tc.args
		if !strings.HasPrefix(args[0], "--kub") {
			args = append(args, "--kubeconfig", kubeconfig)
		}
		cmd.SetArgs(append(args, "--metrics-bind-address=0", "--health-probe-bind-address=0", fmt.Sprintf("--metrics-prefix=hotcert_app%d", runs.Add(1))))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := cmd.ExecuteContext(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestVersion: --version prints the version and exits.
func TestVersion(t *testing.T) {
	var stdout bytes.Buffer
	cmd := NewCommand(&stdout, io.Discard)
	cmd.SetArgs([]string{"--version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := stdout.String(); !strings.HasPrefix(got, "hotcert-controller version ") || strings.TrimSpace(strings.TrimPrefix(got, "hotcert-controller version ")) == "" {
		t.Errorf("--version printed %q", got)
	}
}

// writeKubeconfig writes a kubeconfig for the test API server whose context
// names namespace ns ("" for none).
func writeKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.Load(env.KubeConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Contexts {
		c.Namespace = ns
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func createSecret(t *testing.T, ns, name, value string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"a": []byte(value)}}
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func updateSecret(t *testing.T, ns, name, value string) {
	t.Helper()
	s, err := env.Clientset().CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["a"] = []byte(value)
	if _, err := env.Clientset().CoreV1().Secrets(ns).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createDeployment creates an opted-in Deployment of no replicas that
// consumes key a of Secret s.
func createDeployment(t *testing.T, ns, name string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{rollout.AnnotationRolloutOnChange: "true"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "a"}}}},
				}}},
			},
		},
	}
	if _, err := env.Clientset().AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := env.Clientset().AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func waitAdopted(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, name+" adopted", func() bool { return deployment(t, ns, name).Annotations[rollout.AnnotationAppliedHash] != "" })
}

func stamped(t *testing.T, ns, name string) bool {
	return rollout.Stamped(&deployment(t, ns, name).Spec.Template) != ""
}

func waitLease(t *testing.T, ns, name string) {
	t.Helper()
	waitFor(t, "the Lease "+ns+"/"+name, func() bool {
		_, err := env.Clientset().CoordinationV1().Leases(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	})
}

// waitFor polls cond until it holds, for up to a minute (the controller and
// the API server share two busy cores with other tests).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func get(url string) (int, string) {
	resp, err := http.Get(url) //nolint:gosec // loopback test endpoint
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// servingKeyPair writes a serving certificate (for localhost and 127.0.0.1)
// and its key, and returns their CA and paths.
func servingKeyPair(t *testing.T) (ca *hotcerttest.CA, crt, key string) {
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
