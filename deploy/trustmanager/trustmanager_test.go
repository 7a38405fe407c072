package trustmanager

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/deploy/internal/process"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/source/kube"
	"github.com/hotcert/hotcert/tlsconfig"
)

const (
	pollTimeout = 2 * time.Minute
	serverName  = "control-plane.test"
	bundleName  = "agent-ca"
	bundleKey   = "ca.crt"
)

// TestCARotationWithTrustManager runs trust-manager (its webhook registered
// with the API server and served) and plays the rotation: a Bundle whose
// sources are one ConfigMap per CA writes their union to a ConfigMap in the
// agents' namespace; an agent (a hotcert.Reloader on that ConfigMap, with
// tlsconfig's client config, re-reading on every dial) dials a server whose
// leaf switches from the old CA to the new one at step 2. At each step the
// agent trusts exactly the CAs the Bundle names, and no handshake fails.
func TestCARotationWithTrustManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	trustNS, agentNS := env.NewNamespace(t), env.NewNamespace(t)
	labelNamespace(t, agentNS)
	runTrustManager(t, trustNS)

	oldCA, newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("agent CA 1")), hotcerttest.MustNewCA(hotcerttest.WithCommonName("agent CA 2"))
	oldLeaf := oldCA.MustIssue(hotcerttest.WithDNSNames(serverName))
	newLeaf := newCA.MustIssue(hotcerttest.WithDNSNames(serverName))
	createCAConfigMap(t, trustNS, "ca-1", oldCA.CertPEM)
	createCAConfigMap(t, trustNS, "ca-2", newCA.CertPEM)

	// Before the rotation: the Bundle names the old CA only.
	applyBundle(t, "ca-1")
	waitConfigMap(t, agentNS, oldCA)

	// The agent reads the ConfigMap trust-manager writes.
	src := kube.NewConfigMap(env.Clientset(), agentNS, bundleName, kube.WithCAKey(bundleKey))
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := hotcert.New(ctx, src, hotcert.WithComponent("agent"), hotcert.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = agent.Start(ctx) }()
	t.Cleanup(func() { _ = agent.Close() })
	clientCfg := tlsconfig.ClientConfig(agent, serverName, tlsconfig.WithReloadOnDial(agent))

	srv := newServer(t, oldLeaf)
	var (
		mu                   sync.Mutex
		handshakes, failures int
		firstFailure         error
	)
	dial := func() {
		err := handshake(ctx, srv.addr, clientCfg)
		mu.Lock()
		defer mu.Unlock()
		handshakes++
		if err != nil {
			failures++
			if firstFailure == nil {
				firstFailure = err
			}
		}
	}
	// An agent connecting again and again, across every step.
	stopDialing := make(chan struct{})
	dialed := make(chan struct{})
	go func() {
		defer close(dialed)
		for {
			select {
			case <-stopDialing:
				return
			default:
				dial()
			}
		}
	}()
	// trusts waits until the agent trusts exactly cas, dialing the server
	// at every look.
	trusts := func(step string, cas ...*hotcerttest.CA) {
		t.Helper()
		want := fingerprints(cas...)
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
			dial()
			return equalSets(agent.Current().TrustFingerprints(), want), nil
		}); err != nil {
			t.Fatalf("%s: the agent trusts %v, the Bundle says %v: %v", step, agent.Current().TrustFingerprints(), want, err)
		}
		dial()
		// What the agent exports for rotation readiness (and the
		// rotation alerts) is what it trusts.
		if got := exportedCAs(t, reg); !equalSets(got, want) {
			t.Fatalf("%s: the agent exports hotcert_tls_ca_certificate_info for %v, the Bundle says %v", step, got, want)
		}
	}
	trusts("before the rotation", oldCA)

	// Step 1: the new CA's source is added; the union reaches the agent.
	applyBundle(t, "ca-1", "ca-2")
	waitConfigMap(t, agentNS, oldCA, newCA)
	trusts("step 1", oldCA, newCA)

	// Step 2: the server's leaf switches to the new CA.
	srv.setLeaf(newLeaf)
	trusts("step 2", oldCA, newCA)

	// Step 3: the old CA's source is removed; the agent trusts the new CA
	// only, and a server still on the old CA is refused.
	applyBundle(t, "ca-2")
	waitConfigMap(t, agentNS, newCA)
	trusts("step 3", newCA)
	stale := newServer(t, oldLeaf)
	if err := handshake(ctx, stale.addr, clientCfg); err == nil {
		t.Error("after step 3, the agent still accepts a leaf of the removed CA")
	}

	close(stopDialing)
	<-dialed
	if failures != 0 || handshakes == 0 {
		t.Fatalf("%d of %d handshakes failed during the rotation; first: %v", failures, handshakes, firstFailure)
	}
	t.Logf("%d handshakes, none failed", handshakes)
}

// runTrustManager runs the trust-manager binary against the API server, with
// trustNS as its trust namespace and its validating webhook served on
// loopback and registered for Bundles, until the test ends.
func runTrustManager(t *testing.T, trustNS string) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	webhookCA := hotcerttest.MustNewCA()
	serving := webhookCA.MustIssue(hotcerttest.WithIPAddresses(net.IPv4(127, 0, 0, 1)))
	certDir := filepath.Join(dir, "tls")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	webhookPort, metricsPort, readyPort := testutil.FreePort(t, "127.0.0.1"), testutil.FreePort(t, "127.0.0.1"), testutil.FreePort(t, "127.0.0.1")
	process.Start(t, filepath.Join(binDir, "trust-manager"), []string{
		"--kubeconfig=" + kubeconfig,
		"--trust-namespace=" + trustNS,
		"--leader-elect=false",
		"--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(webhookPort), "--webhook-certificate-dir=" + certDir,
		"--metrics-port=" + strconv.Itoa(metricsPort), "--readiness-probe-port=" + strconv.Itoa(readyPort),
		"--log-level=2",
	})

	// trust-manager's webhook validates every Bundle write, as installed by
	// its chart (failurePolicy Fail).
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "trust-manager-" + trustNS},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "trust.cert-manager.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL:      ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate-trust-cert-manager-io-v1alpha1-bundle", webhookPort)),
				CABundle: webhookCA.CertPEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{"trust.cert-manager.io"}, APIVersions: []string{"v1alpha1"}, Resources: []string{"bundles"},
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}
	ctx := context.Background()
	if _, err := env.Clientset().AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Clientset().AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), vwc.Name, metav1.DeleteOptions{})
	})
	// The webhook is up when it refuses what only it checks: a target
	// annotation in trust-manager's own domain.
	bad := bundle("ca-1")
	bad.SetName("invalid-" + trustNS)
	if err := unstructured.SetNestedStringMap(bad.Object, map[string]string{"trust.cert-manager.io/x": "y"}, "spec", "target", "configMap", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		last = env.Client().Create(ctx, bad.DeepCopy(), client.DryRunAll)
		if last == nil {
			// Accepted (a dry run: nothing is stored): the API server has not
			// seen the webhook configuration yet, which it reads from its own
			// informer a moment after the create. Ask again.
			last = errors.New("trust-manager's webhook accepted a Bundle target annotation in trust.cert-manager.io")
			return false, nil
		}
		return strings.Contains(last.Error(), "denied the request") && strings.Contains(last.Error(), "not allowed"), nil
	}); err != nil {
		t.Fatalf("trust-manager's webhook does not answer: %v (last: %v)", err, last)
	}
}

// bundle returns the Bundle that distributes the union of the ConfigMaps
// named sources (key ca.crt) to namespaces labelled for agents.
func bundle(sources ...string) *unstructured.Unstructured {
	var srcs []any
	for _, s := range sources {
		srcs = append(srcs, map[string]any{"configMap": map[string]any{"name": s, "key": bundleKey}})
	}
	b := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trust.cert-manager.io/v1alpha1",
		"kind":       "Bundle",
		"metadata":   map[string]any{"name": bundleName},
		"spec": map[string]any{
			"sources": srcs,
			"target": map[string]any{
				"configMap":         map[string]any{"key": bundleKey},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{agentLabel: "true"}},
			},
		},
	}}
	return b
}

// agentLabel marks the namespaces the Bundle writes to.
const agentLabel = "hotcert.dev/agents"

func labelNamespace(t *testing.T, ns string) {
	t.Helper()
	n, err := env.Clientset().CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[agentLabel] = "true"
	if _, err := env.Clientset().CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// applyBundle creates or updates the Bundle with sources.
func applyBundle(t *testing.T, sources ...string) {
	t.Helper()
	ctx := context.Background()
	b := bundle(sources...)
	cur := b.DeepCopy()
	if err := env.Client().Get(ctx, client.ObjectKey{Name: bundleName}, cur); err == nil {
		b.SetResourceVersion(cur.GetResourceVersion())
		if err := env.Client().Update(ctx, b); err != nil {
			t.Fatalf("updating the Bundle to %v: %v", sources, err)
		}
		return
	}
	if err := env.Client().Create(ctx, b); err != nil {
		t.Fatalf("creating the Bundle: %v", err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), b) })
}

func createCAConfigMap(t *testing.T, ns, name string, pem []byte) {
	t.Helper()
	if _, err := env.Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{bundleKey: string(pem)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitConfigMap waits until the Bundle's target ConfigMap in ns holds exactly
// the certificates of cas.
func waitConfigMap(t *testing.T, ns string, cas ...*hotcerttest.CA) {
	t.Helper()
	want := fingerprints(cas...)
	var got []hotcert.Fingerprint
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		cm, err := env.Clientset().CoreV1().ConfigMaps(ns).Get(ctx, bundleName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		certs, err := hotcert.ParseCertificates(hotcert.Input{Name: "ConfigMap " + bundleName, Data: []byte(cm.Data[bundleKey])})
		if err != nil {
			return false, err
		}
		got = got[:0]
		for _, c := range certs {
			got = append(got, hotcert.FingerprintOf(c))
		}
		return equalSets(got, want), nil
	}); err != nil {
		t.Fatalf("trust-manager's ConfigMap %s/%s holds %v, want %v: %v", ns, bundleName, got, want, err)
	}
}

// exportedCAs returns the fingerprints of the agent's
// hotcert_tls_ca_certificate_info series.
func exportedCAs(t *testing.T, reg *prometheus.Registry) []hotcert.Fingerprint {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []hotcert.Fingerprint
	for _, mf := range mfs {
		if mf.GetName() != "hotcert_tls_ca_certificate_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "sha256" {
					continue
				}
				raw, err := hex.DecodeString(l.GetValue())
				if err != nil || len(raw) != 32 {
					t.Fatalf("sha256 label %q", l.GetValue())
				}
				out = append(out, hotcert.Fingerprint(raw))
			}
		}
	}
	return out
}

func fingerprints(cas ...*hotcerttest.CA) []hotcert.Fingerprint {
	var out []hotcert.Fingerprint
	for _, ca := range cas {
		out = append(out, hotcert.FingerprintOf(ca.Cert))
	}
	return out
}

func equalSets(a, b []hotcert.Fingerprint) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[hotcert.Fingerprint]bool{}
	for _, f := range a {
		set[f] = true
	}
	for _, f := range b {
		if !set[f] {
			return false
		}
	}
	return true
}

// server is a TLS server on loopback whose leaf the test switches.
type server struct {
	addr string
	mu   sync.Mutex
	leaf *tls.Certificate
}

func newServer(t *testing.T, leaf *hotcerttest.Leaf) *server {
	t.Helper()
	s := &server{}
	s.setLeaf(leaf)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.leaf, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s.addr = ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = c.Write([]byte("ok"))
			}()
		}
	}()
	return s
}

func (s *server) setLeaf(l *hotcerttest.Leaf) {
	c := l.TLSCertificate()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaf = &c
}

// handshake dials addr with cfg and completes a handshake (and reads the
// server's greeting).
func handshake(ctx context.Context, addr string, cfg *tls.Config) error {
	d := tls.Dialer{Config: cfg}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	buf := make([]byte, 2)
	if _, err := c.Read(buf); err != nil {
		return fmt.Errorf("reading from %s: %w", addr, err)
	}
	return nil
}
