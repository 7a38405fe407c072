package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/rollout"
)

// TestRun runs the controller process as hotcert-controller does, from its
// flags: leader election, health and readiness probes, the metrics endpoint
// with the rollout metrics, a rollout, and the admission webhook served over
// TLS with its certificate's metrics.
func TestRun(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	metricsPort, probePort, webhookPort := freePort(t), freePort(t), freePort(t)
	prefix := fmt.Sprintf("hotcert_run%d", runs.Add(1))
	ca, crt, key := servingKeyPair(t)
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{
		"--kubeconfig", kubeconfig, "--namespace", ns,
		"--leader-election-namespace", ns, "--leader-election-id", "hotcert-run-test",
		"--leader-election-lease-duration=3s", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=200ms",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		"--min-interval=0",
		// The metrics go to controller-runtime's process-wide registry: a
		// prefix of this run's own lets the test run again in one process
		// (-count=2).
		"--metrics-prefix=" + prefix,
		fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", webhookPort), "--webhook-cert-file", crt, "--webhook-key-file", key,
	}); err != nil {
		t.Fatal(err)
	}
	cfg.SkipNameValidation = true // other tests in this process run controllers of the same names

	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, logr.Discard()) }()
	t.Cleanup(func() {
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

	for _, path := range []string{"/healthz", "/readyz"} {
		waitFor(t, path, func() (bool, error) {
			code, _ := get(fmt.Sprintf("http://127.0.0.1:%d%s", probePort, path))
			return code == http.StatusOK, nil
		})
	}
	waitAdopted(t, ns, "app")
	if _, err := clientset().CoordinationV1().Leases(ns).Get(testContext(t), "hotcert-run-test", metav1.GetOptions{}); err != nil {
		t.Fatalf("no leader election Lease: %v", err)
	}
	updateSecret(t, ns, "s", setKey("a", "2"))
	waitReplicaSets(t, ns, "app", 2)
	waitFor(t, "the rollout metrics", func() (bool, error) {
		_, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		return strings.Contains(body, prefix+`_rollouts_total{kind="Deployment",reason="config_changed",result="rolled"} 1`) &&
			strings.Contains(body, prefix+`_rollout_queue_depth{kind="Deployment"}`) &&
			strings.Contains(body, prefix+`_rollout_digested_objects 1`) &&
			strings.Contains(body, prefix+`_tls_cert_not_after_seconds{component="webhook"}`), nil
	})

	// The webhook answers an AdmissionReview over TLS, with the configured
	// certificate.
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","operation":"CREATE","object":{}}}`
	waitFor(t, "the webhook", func() (bool, error) {
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d/mutate", webhookPort), "application/json", strings.NewReader(review))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"uid":"u1","allowed":true`), nil
	})
}

// runs numbers TestRun's runs in this process.
var runs atomic.Int32

func get(url string) (int, string) {
	resp, err := http.Get(url) //nolint:gosec // loopback test endpoint
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-rollouts-per-minute=0"}, "would never roll anything"},
		{[]string{"--secret-cache=everything"}, "want referenced, metadata or full"},
		{[]string{"--rollout-wait-timeout=-1s"}, "negative"},
		{[]string{"--leader-election-id="}, "leader-election-id is empty"},
		{[]string{"--webhook-bind-address=:9443"}, "--webhook-cert-file and --webhook-key-file"},
	} {
		cfg := DefaultConfig()
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		cfg.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.HashKeyFile = filepath.Join(t.TempDir(), "missing")
	if err := Run(context.Background(), cfg, logr.Discard()); err == nil || !strings.Contains(err.Error(), "--hash-key-file") {
		t.Errorf("Run with a missing hash key file: %v", err)
	}
	short := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.HashKeyFile = short
	if err := Run(context.Background(), cfg, logr.Discard()); err == nil || !strings.Contains(err.Error(), "at least 16 bytes") {
		t.Errorf("Run with a short hash key: %v", err)
	}
	cfg = DefaultConfig()
	cfg.WebhookAddr, cfg.WebhookCertFile, cfg.WebhookKeyFile = "127.0.0.1:0", short, short
	if err := Run(context.Background(), cfg, logr.Discard()); err == nil || !strings.Contains(err.Error(), "webhook certificate") {
		t.Errorf("Run with an unusable webhook certificate: %v", err)
	}
	if cfg := DefaultConfig(); cfg.Validate() != nil || cfg.MinInterval != DefaultMinInterval {
		t.Error("the defaults do not validate")
	}
}

// TestConfigMapsAndProjections: a ConfigMap consumed through a projected
// volume with items rolls on a consumed key only; a bad annotation is
// reported and the default used.
func TestConfigMapsAndProjections(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"},
		Data: map[string]string{"ca.crt": string(testCA.CertPEM), "other": "x"}}
	create(t, cm)
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
		Volumes: []corev1.Volume{{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: "bundle"},
				Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
			}}},
			DefaultMode: ptr.To[int32](0o444),
		}}}},
	}
	create(t, deployment(ns, "app", 0, spec, with(optIn, rollout.AnnotationMinInterval, "soon")))
	c := startController(t, ns, testOptions())
	waitAdopted(t, ns, "app")
	waitEvent(t, ns, "app", EventInvalidAnnotation, `hotcert.dev/min-interval="soon"`)

	cm.Data["other"] = "y"
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller to read the unconsumed change", func() (bool, error) {
		return c.digested(rollout.KindConfigMap, "bundle", cm.ResourceVersion), nil
	})
	holds(t, 500*time.Millisecond, "no rollout", func() (bool, error) { return replicaSets(t, ns, "app") == 1, nil })

	cm.Data["ca.crt"] = string(hotcertCA().CertPEM)
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", EventRolled, "ConfigMap bundle key ca.crt changed")

	// A truncated bundle is refused.
	cm.Data["ca.crt"] = string(testCA.CertPEM[:len(testCA.CertPEM)/2])
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "app", EventRefused, "ConfigMap "+ns+"/bundle key ca.crt")
	holds(t, 500*time.Millisecond, "no rollout into a truncated bundle", func() (bool, error) { return replicaSets(t, ns, "app") == 2, nil })
}
