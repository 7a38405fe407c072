package census_test

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// startProcess runs a program until the test ends; its output goes to the
// test log if the test fails.
func startProcess(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed (hack/tools.sh installs it): %v", name, err)
	}
	var out bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", name, out.String())
		}
	})
	return cmd
}

// startPrometheus runs a real Prometheus server scraping each target every
// second, with the target labels namespace and pod (as the usual
// kubernetes_sd relabeling sets them); it returns its URL once ready.
func startPrometheus(t *testing.T, targets map[string][2]string) string {
	t.Helper()
	return startPrometheusEvery(t, time.Second, targets)
}

// startPrometheusEvery is startPrometheus scraping every interval (whole
// seconds).
func startPrometheusEvery(t *testing.T, interval time.Duration, targets map[string][2]string) string {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global: {scrape_interval: %[1]s, evaluation_interval: %[1]s}\nscrape_configs:\n- job_name: pods\n  static_configs:\n", interval)
	for addr, pod := range targets {
		fmt.Fprintf(&cfg, "  - targets: [%q]\n    labels: {namespace: %q, pod: %q}\n", addr, pod[0], pod[1])
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePort(t, "127.0.0.1")))
	startProcess(t, "prometheus", "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	url := "http://" + addr
	deadline := time.Now().Add(pollTimeout)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready at %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startOpenSSL runs `openssl s_server` serving leaf on ip: a program that
// is not Go and reads its certificate once, at start. It returns the port
// once it accepts connections.
func startOpenSSL(t *testing.T, ip string, leaf *hotcerttest.Leaf) int {
	t.Helper()
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(cert, leaf.ChainPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, leaf.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	port := testutil.FreePort(t, ip)
	startProcess(t, "openssl", "s_server", "-quiet", "-accept", net.JoinHostPort(ip, strconv.Itoa(port)), "-cert", cert, "-key", key)
	deadline := time.Now().Add(pollTimeout)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("openssl s_server does not accept on %s:%d: %v", ip, port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// endpointSlice points the Service "cp" at pod on ip:port.
func endpointSlice(ns, pod, ip string, port int) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "cp-" + pod, Labels: map[string]string{discoveryv1.LabelServiceName: "cp"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// TestCensusWithPrometheusAndOpenSSL: what a library process holds is read
// from a real Prometheus server scraping it (one query per census); a
// library process that loses the new CA is named within a scrape interval;
// a server that is not Go (openssl s_server, which reads its certificate at
// start) is judged by a handshake: it holds switch-server-cert back while it
// serves the old leaf, until it restarts on the new one.
func TestCensusWithPrometheusAndOpenSSL(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := testContext(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	both := hotcerttest.BundlePEM(ca2025, ca2026)
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(both)}})
	newLeaf := ca2026.MustIssue(hotcerttest.WithDNSNames("cp.example"))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": newLeaf.ChainPEM, "tls.key": newLeaf.KeyPEM}})

	lib := startLibraryProcess(t, ca2026.MustIssue(), both)
	prom := startPrometheus(t, map[string][2]string{net.JoinHostPort("127.0.0.1", strconv.Itoa(lib.port)): {ns, "lib"}})
	longAgo := time.Now().Add(-time.Hour)
	createPod(t, ns, consumerPod{name: "lib", vol: configMapVolume("ca"), started: longAgo})
	ip := hostIP(t)
	// The server started before the Secret got its new leaf: it serves the
	// old one, which it read at start.
	oldPort := startOpenSSL(t, ip, ca2025.MustIssue(hotcerttest.WithDNSNames("cp.example")))
	createPod(t, ns, consumerPod{name: "server", vol: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cp-tls"}}, started: longAgo})
	slice := endpointSlice(ns, "server", ip, oldPort)
	create(t, slice)

	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA:              v1alpha1.CA{Name: "CA-2025", PEM: string(ca2025.CertPEM)},
		NewCA:              v1alpha1.CA{Name: "CA-2026", PEM: string(ca2026.CertPEM)},
		Trust:              []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
		ServerCertificates: []v1alpha1.ServerCertificate{{Namespace: ns, Name: "cp-tls", Port: "https", ServerName: "cp.example"}},
		Evidence:           v1alpha1.Evidence{Prometheus: &v1alpha1.PrometheusSource{URL: prom}},
		Propagation:        v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}},
	})
	startCensus(t)

	tr := waitRotation(t, name, "add-new-ca done from what Prometheus scraped", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepAddNewCA)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if e := tr.Status.Consumers.ByEvidence; e.Reported != 1 || e.Served != 1 {
		t.Fatalf("by evidence %+v", e)
	}
	s := straggler(tr, "server")
	if s == nil || s.Step != v1alpha1.StepSwitchServerCert || s.Evidence != v1alpha1.EvidenceServed ||
		s.Reason != fmt.Sprintf("still serves on %s a leaf issued by CA-2025 (serial %s)", net.JoinHostPort(ip, strconv.Itoa(oldPort)), serialOf(t, ip, oldPort)) {
		t.Fatalf("server straggler %+v", s)
	}

	// The library process reloads a bundle without the new CA: it is named
	// at the next scrape and census.
	lib.load(t, ca2025.CertPEM)
	changed := time.Now()
	tr = waitRotation(t, name, "the library process named", func(tr *v1alpha1.TrustRotation) bool {
		s := straggler(tr, "lib")
		return s != nil && s.Evidence == v1alpha1.EvidenceReported && s.Reason == "reports a bundle without CA-2026"
	})
	t.Logf("named %s after it lost the new CA (scrape interval 1s, census interval 300ms)", time.Since(changed).Round(10*time.Millisecond))
	if c := condition(tr, v1alpha1.StepAddNewCA); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonInProgress {
		t.Fatalf("add-new-ca %+v", c)
	}
	waitEvents(t, name, "StepUndone", 1)
	lib.load(t, both)

	// The server restarts: the new s_server reads the new leaf at start.
	newPort := startOpenSSL(t, ip, newLeaf)
	slice.Ports[0].Port = ptr.To(int32(newPort))
	if err := env.Client().Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
	setStarted(t, ns, "server", time.Now())
	waitRotation(t, name, "switch-server-cert done", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepSwitchServerCert)
		return c != nil && c.Status == metav1.ConditionTrue
	})
}

// serialOf is the serial of the leaf served on ip:port, as openssl prints it.
func serialOf(t *testing.T, ip string, port int) string {
	t.Helper()
	out, err := exec.Command("sh", "-c", fmt.Sprintf("openssl s_client -connect %s </dev/null 2>/dev/null | openssl x509 -noout -serial",
		net.JoinHostPort(ip, strconv.Itoa(port)))).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "serial=")
}
