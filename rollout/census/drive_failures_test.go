package census_test

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

// TestDrivenRotationStopsOnHandshakeFailures: the real `hotcert server`
// serves the canary's Certificate and the real `hotcert agent` connects to
// it, both scraped by a real Prometheus. The agent was acknowledged by a
// person — wrongly: its bundle never gets the new CA. Once the canary's
// server serves a leaf of the new CA and drains the agent's stream, the
// agent's reconnects fail (unknown_authority) and, while the canary soaks,
// the rotation stops, naming the agent and the reason, with a Warning; the
// rest of the Certificates are not switched. Its bundle fixed and the spec
// changed, the rotation resumes, counting failures afresh.
func TestDrivenRotationStopsOnHandshakeFailures(t *testing.T) {
	hotcertBin := buildHotcert(t)
	f := newFleet(t)
	f.certificate("cp2", "cp2-tls", nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The server's volume (the kubelet the test plays copies the Secret
	// into it) and the agent's bundle, which never gets the new CA.
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	secretData := func() map[string][]byte {
		s := &corev1.Secret{}
		if err := env.Client().Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "cp-tls"}, s); err != nil {
			return nil
		}
		return map[string][]byte{"tls.crt": s.Data["tls.crt"], "tls.key": s.Data["tls.key"]}
	}
	tlsDir.MustWrite(secretData())
	caDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "ca"))
	caDir.MustWrite(map[string][]byte{"ca.crt": f.ca2025.CertPEM})
	wg.Go(func() {
		var last []byte
		for ctx.Err() == nil {
			f.issue() // cert-manager
			if d := secretData(); d != nil && !bytes.Equal(d["tls.crt"], last) {
				last = d["tls.crt"]
				tlsDir.MustWrite(d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	ip := f.ip
	cpPort, cpMetrics, agentMetrics := testutil.FreePort(t, ip), testutil.FreePort(t, ip), testutil.FreePort(t, ip)
	startProcess(t, hotcertBin, "server", "--cert-file", filepath.Join(tlsDir.Dir(), "tls.crt"), "--key-file", filepath.Join(tlsDir.Dir(), "tls.key"),
		"--listen", net.JoinHostPort(ip, strconv.Itoa(cpPort)), "--metrics-bind-address", net.JoinHostPort(ip, strconv.Itoa(cpMetrics)), "--replica", "cp",
		"--trust-guard=false", "--drain-window", "500ms")
	waitListening(t, ip, cpPort)
	startProcess(t, hotcertBin, "agent", "--server", net.JoinHostPort(ip, strconv.Itoa(cpPort)), "--server-name", "cp.example",
		"--ca-file", filepath.Join(caDir.Dir(), "ca.crt"), "--metrics-bind-address", net.JoinHostPort(ip, strconv.Itoa(agentMetrics)), "--id", "agent-1",
		"--min-backoff", "200ms", "--max-backoff", "500ms", "--reconnect-jitter", "100ms")
	prom := startPrometheus(t, map[string][2]string{
		net.JoinHostPort(ip, strconv.Itoa(cpMetrics)):    {f.ns, "cp"},
		net.JoinHostPort(ip, strconv.Itoa(agentMetrics)): {f.ns, "agent"},
	})
	longAgo := time.Now().Add(-time.Hour)
	createPod(t, f.ns, consumerPod{name: "cp", vol: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cp-tls"}}, started: longAgo})
	create(t, endpointSlice(f.ns, "cp", ip, cpPort))
	createPod(t, f.ns, consumerPod{name: "agent", vol: configMapVolume("ca"), started: longAgo})

	f.rotation(func(s *v1alpha1.TrustRotationSpec) {
		s.ServerCertificates = append(s.ServerCertificates, v1alpha1.ServerCertificate{Namespace: f.ns, Name: "cp2-tls", Port: "https", ServerName: "cp.example"})
		s.Evidence = v1alpha1.Evidence{Prometheus: &v1alpha1.PrometheusSource{URL: prom}}
		s.Acknowledged = []v1alpha1.Acknowledgement{{Namespace: f.ns, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Reason: "checked by hand (wrongly: its bundle is never updated)"}}
		s.Drive.Canary = &v1alpha1.Canary{Percent: 50, Soak: &metav1.Duration{Duration: 10 * time.Minute}}
	})
	runCensus(t)

	tr := waitRotation(t, f.name, "stopped", func(tr *v1alpha1.TrustRotation) bool { return drivePhase(tr) == v1alpha1.PhaseStopped })
	sw := stepOf(tr, v1alpha1.StepSwitchServerCert)
	msg := tr.Status.Drive.Message
	// The agent counts its failures as unknown_authority, the server the
	// agent's refusals as peer_rejected: whichever Prometheus scraped first
	// names the failing pair.
	agent, server := strings.Contains(msg, "pod "+f.ns+"/agent (") && strings.Contains(msg, "unknown_authority)"),
		strings.Contains(msg, "pod "+f.ns+"/cp (") && strings.Contains(msg, "peer_rejected)")
	if sw.CanaryWritten == nil || !agent && !server || !strings.Contains(msg, "threshold 3") {
		t.Fatalf("stopped at %s (switch %+v): %s", tr.Status.Drive.Step, sw, msg)
	}
	if n := countEvents(t, f.name, drive.EventStopped, "handshake failures meaning not trusted"); n != 1 {
		t.Fatalf("%d DriveStopped Warnings for the failures", n)
	}
	stopped := time.Now()
	time.Sleep(time.Second) // three censuses: still stopped, nothing more switched
	if tr = rotation(t, f.name); drivePhase(tr) != v1alpha1.PhaseStopped || f.issuerOf("cp") != "ca-2026" || f.issuerOf("cp2") != "ca-2025" || stepOf(tr, v1alpha1.StepSwitchServerCert).Written != nil {
		t.Fatalf("phase %s, issuers cp %s cp2 %s", drivePhase(tr), f.issuerOf("cp"), f.issuerOf("cp2"))
	}
	t.Logf("stopped %s after the canary's switch: %s", stopped.Sub(sw.CanaryWritten.Time).Round(100*time.Millisecond), msg)

	// Fixed: the agent gets the union; the spec changes; the rotation
	// resumes, counting failures from then.
	caDir.MustWrite(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(f.ca2025, f.ca2026)})
	time.Sleep(2 * time.Second) // the agent reconnects on the union
	editRotation(t, f.name, func(s *v1alpha1.TrustRotationSpec) { s.Acknowledged[0].Reason = "its bundle fixed by hand" })
	tr = waitRotation(t, f.name, "resumed", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) != v1alpha1.PhaseStopped && tr.Status.Drive.ObservedGeneration == tr.Generation
	})
	if tr.Status.Drive.FailuresSince == nil || !tr.Status.Drive.FailuresSince.After(stopped) {
		t.Fatalf("failures counted since %v after the resume", tr.Status.Drive.FailuresSince)
	}
	time.Sleep(3 * time.Second) // three scrapes: no new failure stops it
	if tr = rotation(t, f.name); drivePhase(tr) == v1alpha1.PhaseStopped {
		t.Fatalf("stopped again after the fix: %s", tr.Status.Drive.Message)
	}
}
