package census_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	clocktesting "k8s.io/utils/clock/testing"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// The fleet's declared intervals: Prometheus scrapes every fleetScrape, the
// census runs every fleetCensus (well under it), the kubelet's delays are
// fleetVolumeDelay and fleetCTBDelay.
const (
	fleetScrape      = 2 * time.Second
	fleetCensus      = 300 * time.Millisecond
	fleetVolumeDelay = time.Second
	fleetCTBDelay    = 2 * time.Second
)

// truth is what the test knows of one consumer: its evidence class and state
// (as the status counts them), and whether it holds the next step back.
type truth struct {
	pod, object string
	evidence    string
	state       string // new, both, old, neither, unknown
}

// TestCensusOfAMixedFleet: a mixed fleet of real processes on this
// machine's non-loopback address, each behind a Pod object (and, for the
// servers, an EndpointSlice), scraped by a real Prometheus server:
//
//   - lib-server: a server built on the hotcert library (it serves the
//     server certificate and follows the trust bundle);
//   - lib-client: a client built on the hotcert library;
//   - cp and agent: the real `hotcert server` and `hotcert agent` binaries,
//     the agent connected to the server;
//   - openssl: `openssl s_server`, a program that is not Go and reads its
//     trust (-CAfile) once, at start;
//   - liar: a python3 process that reads its trust once at start and
//     serves metrics, but no hotcert series;
//   - subpath: a pod mounting the bundle with subPath;
//   - ctb: a pod projecting the ClusterTrustBundle.
//
// The census matches the ground truth case by case (each consumer's
// evidence class and state, the stragglers exactly those the test knows to
// be unproven); the library client, left on the old trust, is named before
// Prometheus scrapes it a second time after it lost the new CA; the subPath
// consumer keeps remove-old-ca from being safe until it restarts.
func TestCensusOfAMixedFleet(t *testing.T) {
	hotcertBin := buildHotcert(t)
	ns := env.NewNamespace(t)
	ip := hostIP(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	both := hotcerttest.BundlePEM(ca2025, ca2026)

	// The cluster: add-new-ca is applied to the bundle (a ConfigMap) and
	// the ClusterTrustBundle; the server certificate Secret holds a leaf of
	// the new CA.
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(both)}})
	ctb := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "fleet-" + ns}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(both)}}
	create(t, ctb)
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), ctb) })
	leaf := ca2026.MustIssue(hotcerttest.WithDNSNames("cp.example"))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}})

	// The processes, each with the files its volumes hold.
	tlsDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "tls"))
	tlsDir.MustWrite(map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM})
	caDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "ca"))
	caDir.MustWrite(map[string][]byte{"ca.crt": both})
	caFile := filepath.Join(caDir.Dir(), "ca.crt")
	libServer := startLibraryServer(t, ip, filepath.Join(tlsDir.Dir(), "tls.crt"), filepath.Join(tlsDir.Dir(), "tls.key"), caFile)
	clientDir := hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "client"))
	clientLeaf := ca2026.MustIssue()
	clientDir.MustWrite(map[string][]byte{"tls.crt": clientLeaf.ChainPEM, "tls.key": clientLeaf.KeyPEM, "ca.crt": both})
	libClient := startLibraryClient(t, ip, clientDir.Dir())
	cpPort, cpMetrics := testutil.FreePort(t, ip), testutil.FreePort(t, ip)
	startProcess(t, hotcertBin, "server", "--cert-file", filepath.Join(tlsDir.Dir(), "tls.crt"), "--key-file", filepath.Join(tlsDir.Dir(), "tls.key"),
		"--listen", net.JoinHostPort(ip, strconv.Itoa(cpPort)), "--metrics-bind-address", net.JoinHostPort(ip, strconv.Itoa(cpMetrics)), "--replica", "cp")
	agentMetrics := testutil.FreePort(t, ip)
	startProcess(t, hotcertBin, "agent", "--server", net.JoinHostPort(ip, strconv.Itoa(cpPort)), "--server-name", "cp.example", "--ca-file", caFile,
		"--metrics-bind-address", net.JoinHostPort(ip, strconv.Itoa(agentMetrics)), "--id", "agent-1")
	liarMetrics := testutil.FreePort(t, ip)
	startLiar(t, ip, liarMetrics, caFile)
	prom := startPrometheusEvery(t, fleetScrape, map[string][2]string{
		net.JoinHostPort(ip, strconv.Itoa(libServer.metrics)): {ns, "lib-server"},
		net.JoinHostPort(ip, strconv.Itoa(libClient.metrics)): {ns, "lib-client"},
		net.JoinHostPort(ip, strconv.Itoa(cpMetrics)):         {ns, "cp"},
		net.JoinHostPort(ip, strconv.Itoa(agentMetrics)):      {ns, "agent"},
		net.JoinHostPort(ip, strconv.Itoa(liarMetrics)):       {ns, "liar"},
	})

	// Their pods. Every one but openssl's started long before the census.
	longAgo := time.Now().Add(-time.Hour)
	caVol := configMapVolume("ca")
	tlsVol := corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cp-tls"}}
	createFleetPod(t, ns, "lib-server", longAgo, "", fleetVolume{"tls", tlsVol}, fleetVolume{"ca", caVol})
	createFleetPod(t, ns, "lib-client", longAgo, "", fleetVolume{"ca", caVol})
	createFleetPod(t, ns, "cp", longAgo, "", fleetVolume{"tls", tlsVol})
	createFleetPod(t, ns, "agent", longAgo, "", fleetVolume{"ca", caVol})
	createFleetPod(t, ns, "liar", longAgo, "", fleetVolume{"ca", caVol})
	createFleetPod(t, ns, "subpath", longAgo, "ca.crt", fleetVolume{"ca", caVol})
	createFleetPod(t, ns, "ctb", longAgo, "", fleetVolume{"ctb", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To(ctb.Name), Path: "ca.crt"}}}}}})
	create(t, endpointSlice(ns, "lib-server", ip, libServer.port))
	create(t, endpointSlice(ns, "cp", ip, cpPort))

	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{Name: "CA-2025", PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{Name: "CA-2026", PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}},
			{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{Name: ctb.Name}}},
		ServerCertificates: []v1alpha1.ServerCertificate{{Namespace: ns, Name: "cp-tls", ServerName: "cp.example"}},
		Evidence:           v1alpha1.Evidence{Prometheus: &v1alpha1.PrometheusSource{URL: prom}},
		Propagation: v1alpha1.Propagation{Volume: &metav1.Duration{Duration: fleetVolumeDelay},
			ClusterTrustBundle: &metav1.Duration{Duration: fleetCTBDelay}},
	})
	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	startCensusWith(t, census.Options{Interval: fleetCensus, MinSpacing: 50 * time.Millisecond, Clock: clk})

	const cm, ctbObj, secret = "ca", "ctb", "cp-tls"
	fleet := []truth{
		{"agent", cm, v1alpha1.EvidenceReported, "both"},
		{"cp", secret, v1alpha1.EvidenceServed, "new"},
		{"ctb", ctbObj, v1alpha1.EvidenceUnknown, "unknown"},
		{"liar", cm, v1alpha1.EvidenceUnknown, "unknown"},
		{"lib-client", cm, v1alpha1.EvidenceReported, "both"},
		{"lib-server", cm, v1alpha1.EvidenceReported, "both"},
		{"lib-server", secret, v1alpha1.EvidenceServed, "new"},
		{"subpath", cm, v1alpha1.EvidenceNever, "unknown"},
	}
	tr := waitRotation(t, name, "the census of the fleet, every report scraped", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.Total == int32(len(fleet)) && tr.Status.Consumers.ByEvidence.Reported == 3 && tr.Status.Consumers.ByEvidence.Served == 2
	})
	checkFleet(t, tr, fleet)
	if rm := condition(tr, v1alpha1.StepRemoveOldCA); rm.Reason != v1alpha1.ReasonNotSafe || !strings.Contains(rm.Message, "pod "+ns+"/subpath container app (subPath") {
		t.Fatalf("remove-old-ca %+v", rm)
	}
	newSince, ctbSince := tr.Status.Trust[0].NewSince.Time, tr.Status.Trust[1].NewSince.Time

	// openssl s_server starts after the change could reach it: it read the
	// bundle at start, proven by its start time.
	sslStart := afterDelay(clk, newSince, fleetVolumeDelay) // the declared volume delay (1s) after the census saw the new CA
	startOpenSSLTrusting(t, ip, ca2026.MustIssue(), caFile)
	createFleetPod(t, ns, "openssl", sslStart, "", fleetVolume{"ca", caVol})
	fleet = slices.Insert(fleet, 4, truth{"openssl", cm, v1alpha1.EvidenceRestarted, "both"})
	tr = waitRotation(t, name, "the openssl consumer counted, running", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.Total == int32(len(fleet)) && tr.Status.Consumers.ByEvidence.Restarted == 1
	})
	checkFleet(t, tr, fleet)

	// The library client is left on the old trust: its bundle loses the new
	// CA. It is named from the first scrape that sees it, before the next.
	clientDir.MustWrite(map[string][]byte{"tls.crt": clientLeaf.ChainPEM, "tls.key": clientLeaf.KeyPEM, "ca.crt": ca2025.CertPEM})
	libClient.waitTrusts(t, 1)
	lost := time.Now()
	tr = waitRotation(t, name, "the library client named", func(tr *v1alpha1.TrustRotation) bool {
		s := straggler(tr, "lib-client")
		return s != nil && s.Evidence == v1alpha1.EvidenceReported && s.Reason == "reports a bundle without CA-2026"
	})
	named := time.Now()
	scrapes := promScalar(t, prom, fmt.Sprintf(`count_over_time(up{pod="lib-client"}[%dms])`, named.Sub(lost).Milliseconds()), named)
	t.Logf("the library client named %s after it lost the new CA, %v scrape(s) of it later (scrape interval %s, census interval %s)",
		named.Sub(lost).Round(10*time.Millisecond), scrapes, fleetScrape, fleetCensus)
	// 0 only if a scrape began between the reload and lost (within ~10ms).
	if scrapes > 1 {
		t.Fatalf("the library client was named after %v scrapes of it since it lost the new CA, want the first (within one scrape interval)", scrapes)
	}
	fleet[slices.IndexFunc(fleet, func(k truth) bool { return k.pod == "lib-client" })].state = "old"
	checkFleet(t, tr, fleet)
	clientDir.MustWrite(map[string][]byte{"tls.crt": clientLeaf.ChainPEM, "tls.key": clientLeaf.KeyPEM, "ca.crt": both})
	libClient.waitTrusts(t, 2)
	fleet[slices.IndexFunc(fleet, func(k truth) bool { return k.pod == "lib-client" })].state = "both"

	// The liar and the projection's pod restart after the delays: proven by
	// start time. Only the subPath consumer is left, and it keeps
	// remove-old-ca from being safe.
	restart := afterDelay(clk, ctbSince, fleetCTBDelay) // the projection's delay after the census saw the new CA
	setStarted(t, ns, "liar", restart)
	setStarted(t, ns, "ctb", restart)
	for i, k := range fleet {
		if k.pod == "liar" || k.pod == "ctb" {
			fleet[i].evidence, fleet[i].state = v1alpha1.EvidenceRestarted, "both"
		}
	}
	tr = waitRotation(t, name, "every consumer but the subPath one proven", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.ByEvidence.Restarted == 3 && tr.Status.Consumers.ByState.Both == 6
	})
	checkFleet(t, tr, fleet)
	add, rm := condition(tr, v1alpha1.StepAddNewCA), condition(tr, v1alpha1.StepRemoveOldCA)
	if add.Reason != v1alpha1.ReasonUnproven || rm.Reason != v1alpha1.ReasonNotSafe || !strings.Contains(rm.Message, "add-new-ca is not done: pod "+ns+"/subpath container app (subPath") {
		t.Fatalf("add-new-ca %+v, remove-old-ca %+v: the subPath consumer must keep remove-old-ca from being safe", add, rm)
	}

	// It restarts: every step before remove-old-ca is done, and removing
	// the old CA is safe (in progress: the objects still hold it).
	setStarted(t, ns, "subpath", clk.Now())
	tr = waitRotation(t, name, "remove-old-ca safe", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepSwitchServerCert)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	fleet[slices.IndexFunc(fleet, func(k truth) bool { return k.pod == "subpath" })] = truth{"subpath", cm, v1alpha1.EvidenceRestarted, "both"}
	checkFleet(t, tr, fleet)
	if rm := condition(tr, v1alpha1.StepRemoveOldCA); rm.Reason != v1alpha1.ReasonInProgress || tr.Status.Next != v1alpha1.StepRemoveOldCA {
		t.Fatalf("remove-old-ca %+v, next %q", rm, tr.Status.Next)
	}
}

// checkFleet compares the census with the ground truth: the counts by
// evidence and state, and, for the step the census names next, the
// stragglers: exactly the consumers the test knows not to be proven for it,
// each with its evidence.
func checkFleet(t *testing.T, tr *v1alpha1.TrustRotation, fleet []truth) {
	t.Helper()
	var ev v1alpha1.EvidenceCounts
	var st v1alpha1.StateCounts
	pods := map[string]bool{}
	var want []string
	for _, k := range fleet {
		pods[k.pod] = true
		switch k.evidence {
		case v1alpha1.EvidenceReported:
			ev.Reported++
		case v1alpha1.EvidenceServed:
			ev.Served++
		case v1alpha1.EvidenceRestarted:
			ev.Restarted++
		case v1alpha1.EvidenceNever:
			ev.Never++
		default:
			ev.Unknown++
		}
		*map[string]*int32{"new": &st.New, "both": &st.Both, "old": &st.Old, "neither": &st.Neither, "unknown": &st.Unknown}[k.state]++
		// add-new-ca holds back a trust consumer not proven to trust the new CA.
		if tr.Status.Next == v1alpha1.StepAddNewCA && k.object != "cp-tls" && (k.state == "unknown" || k.state == "old" || k.state == "neither") {
			want = append(want, k.pod+" "+k.evidence)
		}
	}
	c := tr.Status.Consumers
	if c.ByEvidence != ev || c.ByState != st || c.Pods != int32(len(pods)) || c.Total != int32(len(fleet)) {
		t.Fatalf("census %+v, ground truth: %d pods, %d consumers, by evidence %+v, by state %+v", c, len(pods), len(fleet), ev, st)
	}
	var got []string
	for _, s := range tr.Status.Stragglers {
		got = append(got, s.Pod+" "+s.Evidence)
	}
	slices.Sort(want)
	slices.Sort(got)
	if tr.Status.Next == v1alpha1.StepAddNewCA && !slices.Equal(got, want) {
		t.Fatalf("stragglers %v, ground truth %v; status %+v", got, want, tr.Status.Stragglers)
	}
}

// fleetVolume is one volume of a fleet pod, mounted at /etc/<name>.
type fleetVolume struct {
	name string
	src  corev1.VolumeSource
}

// createFleetPod creates a pod of one container "app" mounting vols (the
// first with subPath when subPath is set), running since started.
func createFleetPod(t *testing.T, ns, name string, started time.Time, subPath string, vols ...fleetVolume) {
	t.Helper()
	c := corev1.Container{Name: "app", Image: "registry.invalid/app:1"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}}
	for i, v := range vols {
		m := corev1.VolumeMount{Name: v.name, MountPath: "/etc/" + v.name}
		if i == 0 {
			m.SubPath = subPath
		}
		c.VolumeMounts = append(c.VolumeMounts, m)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: v.src})
	}
	pod.Spec.Containers = []corev1.Container{c}
	create(t, pod)
	setStarted(t, ns, name, started)
}

// buildHotcert builds the hotcert binary into a folder of the test's.
func buildHotcert(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hotcert")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/hotcert")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hotcert: %v\n%s", err, out)
	}
	return bin
}

// libraryProc is a process built on the hotcert library: a reloader of its
// files, its metrics on a port of ip.
type libraryProc struct {
	r       *hotcert.Reloader
	port    int // its TLS listener's (servers)
	metrics int
}

// startLibrary runs a reloader of src reporting to a registry served on ip.
func startLibrary(t *testing.T, ip, component string, src hotcert.Source) *libraryProc {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, err := hotcert.New(ctx, src, hotcert.WithObserver(rec), hotcert.WithComponent(component), hotcert.WithPollInterval(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Start(ctx) }()
	t.Cleanup(func() { cancel(); _ = r.Close() })
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}}
	srv.Start()
	t.Cleanup(srv.Close)
	return &libraryProc{r: r, metrics: ln.Addr().(*net.TCPAddr).Port}
}

// startLibraryServer is a TLS server on the hotcert library serving the pair
// of certFile and keyFile, following the trust bundle caFile.
func startLibraryServer(t *testing.T, ip, certFile, keyFile, caFile string) *libraryProc {
	t.Helper()
	src, err := file.New(file.WithKeyPair(certFile, keyFile), file.WithCA(caFile))
	if err != nil {
		t.Fatal(err)
	}
	p := startLibrary(t, ip, "server", src)
	ln, err := tls.Listen("tcp", net.JoinHostPort(ip, "0"), tlsconfig.ServerConfig(p.r))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.port = ln.Addr().(*net.TCPAddr).Port
	return p
}

// startLibraryClient is a client on the hotcert library: its certificate
// and the trust bundle it verifies servers against, from dir.
func startLibraryClient(t *testing.T, ip, dir string) *libraryProc {
	t.Helper()
	src, err := file.New(file.WithKeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")), file.WithCA(filepath.Join(dir, "ca.crt")))
	if err != nil {
		t.Fatal(err)
	}
	return startLibrary(t, ip, "client", src)
}

// waitTrusts waits until the process's bundle holds n CAs.
func (p *libraryProc) waitTrusts(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for len(p.r.Current().TrustFingerprints()) != n {
		if time.Now().After(deadline) {
			t.Fatalf("the library process holds %d CAs, want %d", len(p.r.Current().TrustFingerprints()), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// liarScript reads its trust once, at start, and serves metrics with no
// hotcert series.
const liarScript = `
import http.server, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
body = b"# TYPE liar_up gauge\nliar_up 1\n"
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer((sys.argv[2], int(sys.argv[3])), H).serve_forever()
`

// startLiar runs the python3 process that lies by reporting nothing.
func startLiar(t *testing.T, ip string, port int, caFile string) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "liar.py")
	if err := os.WriteFile(script, []byte(liarScript), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, "python3", script, caFile, ip, strconv.Itoa(port))
	waitListening(t, ip, port)
}

// startOpenSSLTrusting runs `openssl s_server` serving leaf and verifying
// clients against caFile, which it reads once, at start.
func startOpenSSLTrusting(t *testing.T, ip string, leaf *hotcerttest.Leaf, caFile string) {
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
	startProcess(t, "openssl", "s_server", "-quiet", "-accept", net.JoinHostPort(ip, strconv.Itoa(port)), "-cert", cert, "-key", key,
		"-CAfile", caFile, "-verify", "1")
	waitListening(t, ip, port)
}

func waitListening(t *testing.T, ip string, port int) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing accepts on %s:%d: %v", ip, port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// promScalar evaluates an instant query that returns one sample, at at.
func promScalar(t *testing.T, base, query string, at time.Time) float64 {
	t.Helper()
	u := base + "/api/v1/query?" + url.Values{"query": {query}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}.Encode()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	if len(r.Data.Result) != 1 {
		t.Fatalf("%s: %d samples", query, len(r.Data.Result))
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return v
}
