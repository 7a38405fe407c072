package census_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	if kubeconfig := os.Getenv(driveFleetControllerEnv); kubeconfig != "" {
		os.Exit(runDriveFleetController(kubeconfig)) // a child process of TestDrivenRotationOfAFleet
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	kubetest.Main(m, &env, kubetest.WithScheme(s), kubetest.WithCRDPaths("../api/v1alpha1/crd"))
}

const pollTimeout = 60 * time.Second

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// startCensus runs a census controller until the test ends, one census
// every 300ms.
func startCensus(t *testing.T) *prometheus.Registry {
	t.Helper()
	return startCensusWith(t, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond})
}

func startCensusWith(t *testing.T, o census.Options) *prometheus.Registry {
	t.Helper()
	return startCensusAs(t, env.Config(), logr.Discard(), o)
}

// startCensusAs runs a census controller acting with cfg, logging to log,
// until the test ends.
func startCensusAs(t *testing.T, cfg *rest.Config, log logr.Logger, o census.Options) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	o.Registerer, o.SkipNameValidation = reg, true
	c, err := census.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Logger:                 log,
		Scheme:                 env.Scheme(),
		Cache:                  c.CacheOptions(cache.Options{}),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return reg
}

// createRotation creates TrustRotation name with spec, deleted when the
// test ends.
func createRotation(t *testing.T, name string, spec v1alpha1.TrustRotationSpec) {
	t.Helper()
	create(t, &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	t.Cleanup(func() {
		_ = env.Client().Delete(context.Background(), &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client().Create(testContext(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// consumerPod is a pod of one container "app" mounting volume vol (a
// ConfigMap or Secret) at /etc/x, with subPath when subPath is set, and a
// container port "metrics" when metricsPort is not 0.
type consumerPod struct {
	name        string
	vol         corev1.VolumeSource
	subPath     string
	metricsPort int
	started     time.Time
}

// createPod creates the pod and writes its status as a kubelet would: running
// on 127.0.0.1, its container started at p.started.
func createPod(t *testing.T, ns string, p consumerPod) {
	t.Helper()
	c := corev1.Container{Name: "app", Image: "registry.invalid/app:1",
		VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/etc/x", SubPath: p.subPath}}}
	if p.metricsPort != 0 {
		c.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(p.metricsPort)}}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.name, Labels: map[string]string{"app": p.name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: []corev1.Volume{{Name: "v", VolumeSource: p.vol}}}}
	create(t, pod)
	setStarted(t, ns, p.name, p.started)
}

func setStarted(t *testing.T, ns, name string, started time.Time) {
	t.Helper()
	ctx := testContext(t)
	pod := &corev1.Pod{}
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Image: "registry.invalid/app:1",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}
	if err := env.Client().Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func configMapVolume(name string) corev1.VolumeSource {
	return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

// libraryProcess is a process running the hotcert library: its metrics
// endpoint on loopback exports what it holds.
type libraryProcess struct {
	rec  *metrics.Recorder
	port int
	leaf *hotcerttest.Leaf
}

func startLibraryProcess(t *testing.T, leaf *hotcerttest.Leaf, bundle []byte) *libraryProcess {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p := &libraryProcess{rec: rec, leaf: leaf}
	p.port, _ = strconv.Atoi(port)
	p.load(t, bundle)
	return p
}

// load is what the process's reloader does when its bundle changes.
func (p *libraryProcess) load(t *testing.T, bundle []byte) {
	t.Helper()
	m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "tls.crt", Data: p.leaf.ChainPEM}, Key: hotcert.Input{Name: "tls.key", Data: p.leaf.KeyPEM},
		CA: hotcert.Input{Name: "ca.crt", Data: bundle}})
	if err != nil {
		t.Fatal(err)
	}
	p.rec.ObserveLoad("agent", m, false)
}

// hostIP is a non-loopback address of this machine: EndpointSlices refuse
// loopback addresses, so servers that the census finds through one listen
// there.
func hostIP(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("this machine has no non-loopback IPv4 address for an EndpointSlice to point at")
	return ""
}

// tlsServer serves leaf on ip; it returns the port.
func tlsServer(t *testing.T, ip string, leaf *hotcerttest.Leaf) int {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

func rotation(t *testing.T, name string) *v1alpha1.TrustRotation {
	t.Helper()
	tr := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(testContext(t), client.ObjectKey{Name: name}, tr); err != nil {
		t.Fatal(err)
	}
	return tr
}

// waitRotation polls the TrustRotation until cond holds.
func waitRotation(t *testing.T, name, what string, cond func(*v1alpha1.TrustRotation) bool) *v1alpha1.TrustRotation {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		tr := rotation(t, name)
		if cond(tr) {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status:\n%+v", what, tr.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func condition(tr *v1alpha1.TrustRotation, step string) *metav1.Condition {
	return meta.FindStatusCondition(tr.Status.Conditions, step)
}

func straggler(tr *v1alpha1.TrustRotation, pod string) *v1alpha1.Straggler {
	for i, s := range tr.Status.Stragglers {
		if s.Pod == pod {
			return &tr.Status.Stragglers[i]
		}
	}
	return nil
}

// TestCensusOfARotation: a TrustRotation over a ConfigMap bundle and a
// server certificate, with real consumer processes on loopback — a library
// process whose metrics are scraped, a TLS server found through its
// EndpointSlice — and consumers that report nothing (one that read at
// start after the change, one that mounts the key with subPath, one that
// lies by reporting nothing): the census names each with its evidence, keeps
// add-new-ca from being done until the unprovable ones are gone, and walks
// the three steps, one condition each, with an Event per step done.
func TestCensusOfARotation(t *testing.T) {
	ns := env.NewNamespace(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	ctx := testContext(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
		Data: map[string]string{"ca.crt": string(hotcerttest.BundlePEM(ca2025, ca2026))}}
	create(t, cm)
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca-2026"}, Data: map[string]string{"ca.crt": string(ca2026.CertPEM)}})
	serverLeaf := ca2026.MustIssue(hotcerttest.WithDNSNames("cp.example"))
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cp-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": serverLeaf.ChainPEM, "tls.key": serverLeaf.KeyPEM}})

	lib := startLibraryProcess(t, ca2026.MustIssue(), hotcerttest.BundlePEM(ca2025, ca2026))
	longAgo := time.Now().Add(-time.Hour)
	createPod(t, ns, consumerPod{name: "lib", vol: configMapVolume("ca"), metricsPort: lib.port, started: longAgo})
	createPod(t, ns, consumerPod{name: "subpath", vol: configMapVolume("ca"), subPath: "ca.crt", started: longAgo})
	createPod(t, ns, consumerPod{name: "liar", vol: configMapVolume("ca"), started: longAgo})
	ip := hostIP(t)
	serverPort := tlsServer(t, ip, serverLeaf)
	createPod(t, ns, consumerPod{name: "server", vol: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cp-tls"}}, started: longAgo})
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "cp-1", Labels: map[string]string{discoveryv1.LabelServiceName: "cp"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "server"}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(serverPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	})

	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA:              v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA:              v1alpha1.CA{From: &v1alpha1.KeyRef{Kind: "ConfigMap", Namespace: ns, Name: "ca-2026", Key: "ca.crt"}},
		Trust:              []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
		ServerCertificates: []v1alpha1.ServerCertificate{{Namespace: ns, Name: "cp-tls", Port: "https", ServerName: "cp.example"}},
		Evidence:           v1alpha1.Evidence{Scrape: &v1alpha1.ScrapeSource{Port: "metrics"}},
	})
	// The census judges by a clock the test moves past the kubelet's delay
	// (the default, 2m) instead of waiting for it.
	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	startCensusWith(t, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond, Clock: clk})

	// The first census: the library process reports both CAs, the server
	// serves a leaf of the new CA; the subPath consumer and the one that
	// reports nothing started before the census saw the new CA.
	tr := waitRotation(t, name, "the first census", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.ObservedGeneration == tr.Generation && tr.Status.Consumers.Total == 4
	})
	if e := tr.Status.Consumers.ByEvidence; e != (v1alpha1.EvidenceCounts{Reported: 1, Served: 1, Never: 1, Unknown: 1}) {
		t.Fatalf("by evidence %+v; status %+v", e, tr.Status)
	}
	if tr.Status.Trust[0].NewSince == nil || tr.Status.Trust[0].HoldNew != 1 || tr.Status.ServerCertificates[0].IssuedBy != "new" {
		t.Fatalf("objects %+v %+v", tr.Status.Trust, tr.Status.ServerCertificates)
	}
	add := condition(tr, v1alpha1.StepAddNewCA)
	if add == nil || add.Status != metav1.ConditionFalse || add.Reason != v1alpha1.ReasonUnproven {
		t.Fatalf("add-new-ca %+v", add)
	}
	if s := straggler(tr, "subpath"); s == nil || s.Evidence != v1alpha1.EvidenceNever || s.How != "subPath" || !strings.Contains(s.Reason, "restart it") {
		t.Fatalf("subpath straggler %+v", s)
	}
	if s := straggler(tr, "liar"); s == nil || s.Evidence != v1alpha1.EvidenceUnknown {
		t.Fatalf("liar straggler %+v", s)
	}
	if sw := condition(tr, v1alpha1.StepSwitchServerCert); sw == nil || sw.Reason != v1alpha1.ReasonNotSafe {
		t.Fatalf("switch-server-cert %+v", sw)
	}

	// Both restart after the change could reach them (their new containers
	// read the bundle at start): proven by start time.
	restart := afterDelay(clk, tr.Status.Trust[0].NewSince.Time, census.DefaultVolumeDelay)
	setStarted(t, ns, "subpath", restart)
	setStarted(t, ns, "liar", restart)
	tr = waitRotation(t, name, "add-new-ca and switch-server-cert done", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepSwitchServerCert)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if e := tr.Status.Consumers.ByEvidence; e != (v1alpha1.EvidenceCounts{Reported: 1, Served: 1, Restarted: 2}) {
		t.Fatalf("by evidence %+v", e)
	}
	rm := condition(tr, v1alpha1.StepRemoveOldCA)
	if tr.Status.Next != v1alpha1.StepRemoveOldCA || rm.Reason != v1alpha1.ReasonInProgress || !strings.Contains(rm.Message, "ConfigMap "+ns+"/ca key ca.crt still holds CA-2025") {
		t.Fatalf("next %q, remove-old-ca %+v", tr.Status.Next, rm)
	}

	// The old CA leaves the bundle; the library process reloads it.
	cm.Data["ca.crt"] = string(ca2026.CertPEM)
	if err := env.Client().Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	lib.load(t, ca2026.CertPEM)
	tr = waitRotation(t, name, "the old CA seen gone", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Trust[0].OldGoneSince != nil && tr.Status.Consumers.ByEvidence.Reported == 1 && straggler(tr, "lib") == nil
	})
	rm = condition(tr, v1alpha1.StepRemoveOldCA)
	if rm.Status != metav1.ConditionFalse || rm.Reason != v1alpha1.ReasonUnproven || straggler(tr, "subpath") == nil || straggler(tr, "liar") == nil {
		t.Fatalf("remove-old-ca %+v, stragglers %+v: the consumers that read at start before the removal still trust CA-2025", rm, tr.Status.Stragglers)
	}
	restart = afterDelay(clk, tr.Status.Trust[0].OldGoneSince.Time, census.DefaultVolumeDelay)
	setStarted(t, ns, "subpath", restart)
	setStarted(t, ns, "liar", restart)
	tr = waitRotation(t, name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepRemoveOldCA)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if tr.Status.Next != "" || !strings.HasPrefix(tr.Status.Summary, "rotation complete: ") || len(tr.Status.Stragglers) != 0 {
		t.Fatalf("status %+v", tr.Status)
	}
	waitEvents(t, name, census.EventStepDone, 3)

	// At rest a census that finds nothing new writes nothing.
	rv := tr.ResourceVersion
	time.Sleep(time.Second) // three census intervals
	if now := rotation(t, name).ResourceVersion; now != rv {
		t.Fatalf("the status was rewritten at rest (resourceVersion %s, then %s)", rv, now)
	}
}

// afterDelay moves the census's clock to when the kubelet's delay for a
// volume (census.DefaultVolumeDelay) has passed since a change the census saw
// at since, as a container restarting then would see it, and returns that
// time.
func afterDelay(clk *clocktesting.FakePassiveClock, since time.Time, delay time.Duration) time.Time {
	at := since.Add(delay)
	clk.SetTime(at)
	return at
}

// waitEvents waits for n Events of reason on the TrustRotation name.
func waitEvents(t *testing.T, name, reason string, n int) {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		list := &corev1.EventList{}
		if err := env.Client().List(testContext(t), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d %s Events on %s, want %d", got, reason, name, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
