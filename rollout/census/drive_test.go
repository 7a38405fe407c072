package census_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

var installCertManagerCRD = sync.OnceValue(func() error {
	data, err := os.ReadFile("testdata/cert-manager.io_certificates.yaml")
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := env.Client().Create(ctx, u); err != nil {
		return err
	}
	for { // established: a list answers
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(certificateList)
		if err := env.Client().List(ctx, l); err == nil {
			return nil
		} else if ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
})

var certificateList = schema.GroupVersion{Group: "cert-manager.io", Version: "v1"}.WithKind("CertificateList")

// runCensus runs a census controller (driving the rotations in mode Drive)
// until stop is called or the test ends.
func runCensus(t *testing.T) (stop func()) {
	t.Helper()
	return runCensusDriving(t, true)
}

func runCensusDriving(t *testing.T, driving bool) (stop func()) {
	t.Helper()
	c, err := census.New(census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond,
		Registerer: prometheus.NewRegistry(), SkipNameValidation: true, Drive: driving})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Config(), ctrl.Options{Scheme: env.Scheme(), Cache: c.CacheOptions(cache.Options{}),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// fleet is a driven rotation's world: a ConfigMap bundle, a server
// certificate Secret issued by a cert-manager Certificate, real consumer
// processes, and the test playing the parts of cert-manager, the kubelet
// and the rollout controller.
type fleet struct {
	t            *testing.T
	ns, name     string
	ip           string
	ca2025       *hotcerttest.CA
	ca2026       *hotcerttest.CA
	cm           client.ObjectKey
	issuers      map[string]*hotcerttest.CA
	bundle       atomic.Pointer[[]byte] // what the kubelet delivered to the volumes
	servers      []*fleetServer
	certs        map[string]string // cert-manager Certificate -> its Secret
	libs         []*libraryProcess
	handshakes   atomic.Int64
	failed       atomic.Int64
	lastFailure  atomic.Pointer[string]
	restartCount atomic.Int64
	// frozen: the server does not reload its certificate (it reads it at
	// start, and is not restarted).
	frozen atomic.Bool
	// holdIssue: cert-manager issues nothing while set.
	holdIssue atomic.Bool
	// vol is how the consumers mount the bundle (default the ConfigMap),
	// source what the kubelet delivers to them (default its key ca.crt).
	vol    *corev1.VolumeSource
	source func(context.Context) ([]byte, bool)
}

// bundleVolume is the consumers' volume of the bundle.
func (f *fleet) bundleVolume() corev1.VolumeSource {
	if f.vol != nil {
		return *f.vol
	}
	return configMapVolume("ca")
}

// delivered is what the kubelet delivers to the consumers' volumes now.
func (f *fleet) delivered(ctx context.Context) ([]byte, bool) {
	if f.source != nil {
		return f.source(ctx)
	}
	cm := &corev1.ConfigMap{}
	if env.Client().Get(ctx, f.cm, cm) != nil {
		return nil, false
	}
	return []byte(cm.Data["ca.crt"]), true
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	if err := installCertManagerCRD(); err != nil {
		t.Fatalf("installing cert-manager's Certificate CRD: %v", err)
	}
	f := &fleet{t: t, ns: env.NewNamespace(t), ip: hostIP(t),
		ca2025: hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025")),
		ca2026: hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))}
	f.name = "drive-" + f.ns
	f.issuers = map[string]*hotcerttest.CA{"ca-2025": f.ca2025, "ca-2026": f.ca2026}
	f.cm = client.ObjectKey{Namespace: f.ns, Name: "ca"}
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(f.ca2025.CertPEM)}})
	b := f.ca2025.CertPEM
	f.bundle.Store(&b)
	f.certs = map[string]string{}
	f.certificate("cp", "cp-tls", nil)
	return f
}

// certificate creates a server certificate Secret holding a CA-2025 leaf
// and the cert-manager Certificate issuing it.
func (f *fleet) certificate(name, secret string, labels map[string]any) {
	leaf := f.ca2025.MustIssue(hotcerttest.WithDNSNames("cp.example"))
	create(f.t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: secret}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": f.ca2025.CertPEM}})
	meta := map[string]any{"namespace": f.ns, "name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	create(f.t, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta,
		"spec": map[string]any{"secretName": secret, "dnsNames": []any{"cp.example"}, "issuerRef": map[string]any{"name": "ca-2025", "kind": "ClusterIssuer"}}}})
	f.certs[name] = secret
}

// fleetServer is a TLS server of the fleet: what its reloader holds of its
// Secret.
type fleetServer struct {
	secret  string
	addr    string
	serving atomic.Pointer[tls.Certificate]
}

// rotation creates the driven TrustRotation.
func (f *fleet) rotation(edit func(*v1alpha1.TrustRotationSpec)) {
	spec := v1alpha1.TrustRotationSpec{Mode: v1alpha1.ModeDrive,
		OldCA:              v1alpha1.CA{PEM: string(f.ca2025.CertPEM)},
		NewCA:              v1alpha1.CA{PEM: string(f.ca2026.CertPEM)},
		Trust:              []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: f.ns, Name: "ca", Key: "ca.crt"}}},
		ServerCertificates: []v1alpha1.ServerCertificate{{Namespace: f.ns, Name: "cp-tls", Port: "https", ServerName: "cp.example"}},
		Evidence:           v1alpha1.Evidence{Scrape: &v1alpha1.ScrapeSource{Port: "metrics"}},
		Propagation:        v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}},
		Drive: &v1alpha1.DriveSpec{
			Bundle:  v1alpha1.DriveBundle{ConfigMap: &v1alpha1.ObjectKey{Namespace: f.ns, Name: "ca", Key: "ca.crt"}},
			Reissue: v1alpha1.Reissue{CertManager: &v1alpha1.CertManagerReissue{IssuerRef: v1alpha1.IssuerRef{Name: "ca-2026", Kind: "ClusterIssuer"}}},
		}}
	if edit != nil {
		edit(&spec)
	}
	create(f.t, &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: f.name}, Spec: spec})
	f.t.Cleanup(func() {
		_ = env.Client().Delete(context.Background(), &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: f.name}})
	})
}

// libraryClient starts a hotcert library process consuming the bundle
// (its metrics scraped); follow makes it reload what the kubelet delivers.
func (f *fleet) libraryClient(name string, follow bool) *libraryProcess {
	lib := startLibraryProcess(f.t, f.ca2025.MustIssue(), *f.bundle.Load())
	createPod(f.t, f.ns, consumerPod{name: name, vol: f.bundleVolume(), metricsPort: lib.port, started: time.Now().Add(-time.Hour)})
	if follow {
		f.libs = append(f.libs, lib)
	}
	return lib
}

// server starts a TLS server on the host IP serving the Secret cp-tls, with
// a reloader that follows the Secret, and its pod and EndpointSlice.
func (f *fleet) server() { f.serverOf("cp-tls", "server") }

// serverOf starts a TLS server serving secret, with pod (and EndpointSlice)
// pod.
func (f *fleet) serverOf(secret, pod string) {
	t := f.t
	fs := &fleetServer{secret: secret}
	f.servers = append(f.servers, fs)
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	ln, err := net.Listen("tcp", net.JoinHostPort(f.ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return fs.serving.Load(), nil }}
	fs.addr = ln.Addr().String()
	f.loadServing()
	srv.StartTLS()
	t.Cleanup(srv.Close)
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	port, _ := strconv.Atoi(p)
	createPod(t, f.ns, consumerPod{name: pod, vol: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}, started: time.Now().Add(-time.Hour)})
	create(t, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: f.ns, Name: pod, Labels: map[string]string{discoveryv1.LabelServiceName: pod}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{f.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: f.ns, Name: pod}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	})
}

func (f *fleet) loadServing() {
	for _, fs := range f.servers {
		if f.frozen.Load() && fs.serving.Load() != nil {
			continue
		}
		s := &corev1.Secret{}
		if err := env.Client().Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: fs.secret}, s); err != nil {
			continue
		}
		if c, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"]); err == nil {
			fs.serving.Store(&c)
		}
	}
}

// play runs, every 50ms until the test ends: cert-manager (a Certificate's
// issuer issues into its Secret), the kubelet (the ConfigMap to the
// volumes, the Secret to the server's reloader), the Deployment
// controller (the pod of each Deployment rolled restarts when its template
// changes), and a client that handshakes with the server verifying against
// the bundle its volume holds.
func (f *fleet) play(rolled ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	f.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		var last []byte
		stamps := map[string]string{} // Deployment -> the roll stamp its pod runs
		for ctx.Err() == nil {
			f.issue()
			if got, ok := f.delivered(ctx); ok && !bytes.Equal(got, last) {
				last = got
				b := bytes.Clone(last)
				f.bundle.Store(&b)
				for _, l := range f.libs {
					l.load(f.t, b)
				}
			}
			f.loadServing()
			// The Deployment controller and the kubelet: a Deployment's
			// pod restarts when its template changes (a roll).
			for _, name := range rolled {
				dep := &appsv1.Deployment{}
				if env.Client().Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, dep) != nil {
					continue
				}
				if stamp := dep.Spec.Template.Annotations[census.AnnotationRotationRestart]; stamp != stamps[name] {
					stamps[name] = stamp
					setStarted(f.t, f.ns, name, time.Now())
					f.restartCount.Add(1)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	wg.Go(func() {
		for ctx.Err() == nil {
			for _, fs := range f.servers {
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(*f.bundle.Load())
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", fs.addr, &tls.Config{RootCAs: pool, ServerName: "cp.example"})
				f.handshakes.Add(1)
				if err != nil {
					if ctx.Err() == nil {
						f.failed.Add(1)
						msg := fs.addr + ": " + err.Error()
						f.lastFailure.Store(&msg)
					}
				} else {
					conn.Close()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// issue plays cert-manager: a Certificate whose Secret does not hold a leaf
// of its issuer gets one.
func (f *fleet) issue() {
	if f.holdIssue.Load() {
		return
	}
	ctx := context.Background()
	for cert, secret := range f.certs {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersion{Group: "cert-manager.io", Version: "v1"}.WithKind("Certificate"))
		if env.Client().Get(ctx, client.ObjectKey{Namespace: f.ns, Name: cert}, u) != nil {
			continue
		}
		name, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name")
		ca := f.issuers[name]
		s := &corev1.Secret{}
		if ca == nil || env.Client().Get(ctx, client.ObjectKey{Namespace: f.ns, Name: secret}, s) != nil {
			continue
		}
		if bytes.Equal(s.Data["ca.crt"], ca.CertPEM) {
			continue
		}
		leaf := ca.MustIssue(hotcerttest.WithDNSNames("cp.example"))
		s.Data = map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}
		_ = env.Client().Update(ctx, s)
	}
}

func drivePhase(tr *v1alpha1.TrustRotation) string {
	if tr.Status.Drive == nil {
		return ""
	}
	return tr.Status.Drive.Phase
}

func stepOf(tr *v1alpha1.TrustRotation, name string) v1alpha1.DriveStepStatus {
	if tr.Status.Drive != nil {
		for _, s := range tr.Status.Drive.Steps {
			if s.Name == name {
				return s
			}
		}
	}
	return v1alpha1.DriveStepStatus{}
}

// countEvents counts the Events of the rotation name with reason whose
// message holds contains. The controller's recorder writes Events after the
// status that records what they tell, asynchronously: it waits, up to
// eventWait, for the first one to be there (none after it counts 0).
func countEvents(t *testing.T, name, reason, contains string) int {
	t.Helper()
	count := func() int {
		list := &corev1.EventList{}
		if err := env.Client().List(testContext(t), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, contains) {
				n += max(int(e.Count), 1)
			}
		}
		return n
	}
	for deadline := time.Now().Add(eventWait); ; time.Sleep(50 * time.Millisecond) {
		if n := count(); n > 0 || time.Now().After(deadline) {
			return n
		}
	}
}

// eventWait bounds how long countEvents waits for a first Event.
const eventWait = 10 * time.Second

func (f *fleet) configMap() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	if err := env.Client().Get(testContext(f.t), f.cm, cm); err != nil {
		f.t.Fatal(err)
	}
	return cm
}

// TestDrivenRotation: a rotation in mode Drive over a ConfigMap bundle and a
// cert-manager Certificate, with real consumers — a library client whose
// metrics are scraped, a restart-only consumer whose opted-in Deployment the
// controller rolls after each bundle write, a TLS server on the host's
// address found through its EndpointSlice, a client handshaking with it
// all along — goes through the three steps, each written once and only
// after the census proved the one before; the controller, stopped in the
// middle of add-new-ca and started again, resumes without writing the
// bundle again; no handshake fails.
func TestDrivenRotation(t *testing.T) {
	f := newFleet(t)
	f.libraryClient("lib", true)
	f.deployment("legacy", true)
	f.server()
	f.rotation(nil)
	begin := time.Now()
	stop := runCensus(t)

	tr := waitRotation(t, f.name, "the union written", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil
	})
	if got := f.configMap().Data["ca.crt"]; !strings.Contains(got, string(bytes.TrimSpace(f.ca2025.CertPEM))) || !strings.Contains(got, string(bytes.TrimSpace(f.ca2026.CertPEM))) {
		t.Fatalf("the bundle is not the union:\n%s", got)
	}
	if plan := strings.Join(tr.Status.Drive.Plan, "\n"); !strings.Contains(plan, "switch Certificate "+f.ns+"/cp from ClusterIssuer/ca-2025 to ClusterIssuer/ca-2026") {
		t.Fatalf("plan:\n%s", plan)
	}
	// Until legacy restarts, add-new-ca is not proven: the controller is
	// stopped mid-step, and a new one started.
	tr = waitRotation(t, f.name, "waiting on add-new-ca", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseWaiting && tr.Status.Drive.Step == v1alpha1.StepAddNewCA
	})
	if !strings.Contains(tr.Status.Drive.Message, "legacy") {
		t.Fatalf("the message does not name the restart-only consumer: %q", tr.Status.Drive.Message)
	}
	stop()
	rv := f.configMap().ResourceVersion
	runCensus(t)
	time.Sleep(time.Second) // three censuses of the new controller
	if now := f.configMap().ResourceVersion; now != rv {
		t.Fatalf("the restarted controller wrote the bundle again (resourceVersion %s, then %s)", rv, now)
	}
	f.play("legacy")

	tr = waitRotation(t, f.name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseComplete || drivePhase(tr) == v1alpha1.PhaseStopped
	})
	if drivePhase(tr) != v1alpha1.PhaseComplete {
		t.Fatalf("stopped: %s", tr.Status.Drive.Message)
	}
	took := time.Since(begin)
	add, sw, rm := stepOf(tr, v1alpha1.StepAddNewCA), stepOf(tr, v1alpha1.StepSwitchServerCert), stepOf(tr, v1alpha1.StepRemoveOldCA)
	if !add.Done.Time.After(add.Written.Time) && !add.Done.Time.Equal(add.Written.Time) || sw.Started.Before(add.Done) || rm.Started.Before(sw.Done) {
		t.Fatalf("steps out of order: %+v", tr.Status.Drive.Steps)
	}
	if got := f.configMap().Data["ca.crt"]; got != string(f.ca2026.CertPEM) {
		t.Fatalf("the bundle at the end:\n%s", got)
	}
	// The bundle was written twice in all (the union, then the removal):
	// the restarted controller did not write it again.
	for _, c := range []struct{ what, contains string }{{"the union", "add-new-ca:"}, {"the removal", "remove-old-ca:"}, {"the switch", "switch-server-cert: every Certificate"}} {
		if n := countEvents(t, f.name, drive.EventWrote, c.contains); n != 1 {
			t.Errorf("%s was written %d times", c.what, n)
		}
	}
	for _, s := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
		if n := countEvents(t, f.name, drive.EventStarted, "step "+s+" started"); n != 1 {
			t.Errorf("step %s started %d times", s, n)
		}
	}
	if got := f.issuerName(); got != "ca-2026" {
		t.Fatalf("the Certificate's issuer is %q", got)
	}
	// The restart-only consumer's Deployment was rolled once per bundle
	// write, each after the kubelet's delay (else its new pod would not be
	// proven, and the rotation would not be complete).
	dep := &appsv1.Deployment{}
	if err := env.Client().Get(testContext(t), client.ObjectKey{Namespace: f.ns, Name: "legacy"}, dep); err != nil {
		t.Fatal(err)
	}
	if got := dep.Spec.Template.Annotations[census.AnnotationRotationRestart]; got != f.name+"/remove-old-ca" || dep.Annotations["hotcert.dev/last-rollout"] == "" {
		t.Fatalf("the Deployment's stamp %q, annotations %v", got, dep.Annotations)
	}
	if n, r := countEvents(t, f.name, census.EventRolled, "rolled Deployment "+f.ns+"/legacy"), f.restartCount.Load(); n != 2 || r != 2 {
		t.Fatalf("%d DriveRolled Events, %d rolls; want 2", n, r)
	}
	if n := f.failed.Load(); n != 0 {
		t.Fatalf("%d of %d handshakes failed, the last: %s", n, f.handshakes.Load(), *f.lastFailure.Load())
	}
	t.Logf("rotation driven in %s (the restart-only consumer's Deployment rolled twice, 1s propagation delay); %d handshakes, 0 failed", took.Round(100*time.Millisecond), f.handshakes.Load())
}

// TestDrivenRotationStopsOnASabotagedConsumer: a library consumer that never
// loads the union holds the rotation before switch-server-cert, named, and
// the Certificate is never switched; acknowledged (with a reason), it no
// longer holds it.
func TestDrivenRotationStopsOnASabotagedConsumer(t *testing.T) {
	f := newFleet(t)
	f.libraryClient("lib", true)
	sab := f.libraryClient("sabotaged", false) // keeps CA-2025 only
	_ = sab
	f.server()
	f.rotation(nil)
	runCensus(t)
	f.play()

	tr := waitRotation(t, f.name, "held at add-new-ca", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseWaiting && tr.Status.Drive.Step == v1alpha1.StepAddNewCA && straggler(tr, "lib") == nil && strings.Contains(tr.Status.Drive.Message, "sabotaged")
	})
	time.Sleep(time.Second) // three more censuses: still held
	tr = rotation(t, f.name)
	if tr.Status.Drive.Step != v1alpha1.StepAddNewCA || stepOf(tr, v1alpha1.StepSwitchServerCert).Started != nil {
		t.Fatalf("the rotation went past add-new-ca: %+v", tr.Status.Drive)
	}
	if s := straggler(tr, "sabotaged"); s == nil || s.Evidence != v1alpha1.EvidenceReported {
		t.Fatalf("straggler %+v", s)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersion{Group: "cert-manager.io", Version: "v1"}.WithKind("Certificate"))
	if err := env.Client().Get(testContext(t), client.ObjectKey{Namespace: f.ns, Name: "cp"}, u); err != nil {
		t.Fatal(err)
	}
	if name, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name"); name != "ca-2025" {
		t.Fatalf("the Certificate was switched to %q with a consumer not trusting CA-2026", name)
	}

	// Acknowledged by a person: it no longer holds the rotation back.
	tr.Spec.Acknowledged = []v1alpha1.Acknowledgement{{Namespace: f.ns, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "sabotaged"}},
		Reason: "decommissioned tomorrow; its clients are pinned to CA-2025"}}
	if err := env.Client().Update(testContext(t), tr); err != nil {
		t.Fatal(err)
	}
	waitRotation(t, f.name, "switch-server-cert started", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepSwitchServerCert).Written != nil
	})
}

func (f *fleet) issuerName() string { return f.issuerOf("cp") }

func (f *fleet) issuerOf(cert string) string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersion{Group: "cert-manager.io", Version: "v1"}.WithKind("Certificate"))
	if err := env.Client().Get(testContext(f.t), client.ObjectKey{Namespace: f.ns, Name: cert}, u); err != nil {
		f.t.Fatal(err)
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name")
	return name
}

// TestDrivenRotationDryRun: a dry run plans — the bundle it will write,
// the Certificate it will switch, the subPath consumer that must restart
// after each bundle write (the server, proven by its handshakes, is not
// named) — and writes nothing but the status.
func TestDrivenRotationDryRun(t *testing.T) {
	f := newFleet(t)
	createPod(t, f.ns, consumerPod{name: "legacy", vol: configMapVolume("ca"), subPath: "ca.crt", started: time.Now().Add(-time.Hour)})
	f.server()
	f.rotation(func(s *v1alpha1.TrustRotationSpec) { s.Drive.DryRun = true })
	rv := f.configMap().ResourceVersion
	runCensus(t)
	tr := waitRotation(t, f.name, "the plan", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseDryRun && tr.Status.Consumers.Total == 2
	})
	time.Sleep(time.Second)
	tr = rotation(t, f.name)
	plan := strings.Join(tr.Status.Drive.Plan, "\n")
	for _, want := range []string{"add-new-ca: write ConfigMap " + f.ns + "/ca key ca.crt: add CA-2026 beside CA-2025",
		"add-new-ca: pod " + f.ns + "/legacy container app (subPath of ConfigMap " + f.ns + "/ca key ca.crt) reads at start",
		"switch Certificate " + f.ns + "/cp from ClusterIssuer/ca-2025 to ClusterIssuer/ca-2026",
		"remove-old-ca: write ConfigMap " + f.ns + "/ca key ca.crt: remove CA-2025"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan)
		}
	}
	if now := f.configMap().ResourceVersion; now != rv || f.issuerName() != "ca-2025" || len(tr.Status.Drive.Steps) != 0 {
		t.Fatalf("a dry run wrote: bundle resourceVersion %s then %s, issuer %s, steps %+v", rv, now, f.issuerName(), tr.Status.Drive.Steps)
	}
}

// TestDrivenRotationCatchesAOneStepSwap: the old CA removed from the bundle
// by hand while the rotation waits on add-new-ca stops it, with the cause,
// and nothing more is written.
func TestDrivenRotationCatchesAOneStepSwap(t *testing.T) {
	f := newFleet(t)
	createPod(t, f.ns, consumerPod{name: "legacy", vol: configMapVolume("ca"), started: time.Now().Add(-time.Hour)})
	f.server()
	f.rotation(nil)
	runCensus(t)
	waitRotation(t, f.name, "the union written", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil
	})
	cm := f.configMap()
	cm.Data["ca.crt"] = string(f.ca2026.CertPEM) // the swap by hand
	if err := env.Client().Update(testContext(t), cm); err != nil {
		t.Fatal(err)
	}
	tr := waitRotation(t, f.name, "stopped", func(tr *v1alpha1.TrustRotation) bool { return drivePhase(tr) == v1alpha1.PhaseStopped })
	if !strings.Contains(tr.Status.Drive.Message, "no longer holds CA-2025 before remove-old-ca was taken") {
		t.Fatalf("message %q", tr.Status.Drive.Message)
	}
	if n := countEvents(t, f.name, drive.EventStopped, "someone removed it by hand"); n != 1 {
		t.Fatalf("%d Stopped Events", n)
	}
	rv := f.configMap().ResourceVersion
	time.Sleep(time.Second)
	if now := f.configMap().ResourceVersion; now != rv || f.issuerName() != "ca-2025" {
		t.Fatalf("a stopped rotation wrote: bundle %s then %s, issuer %s", rv, now, f.issuerName())
	}
}

// deployment creates a Deployment (opted in to the rollout controller when
// optIn), its ReplicaSet and its one pod, of the same name, a restart-only
// consumer of the bundle: what owns what is as the controllers write it.
func (f *fleet) deployment(name string, optIn bool) {
	t := f.t
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	if optIn {
		dep.Annotations = map[string]string{"hotcert.dev/rollout-on-change": "true"}
	}
	create(t, dep)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name + "-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: dep.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}}
	create(t, rs)
	c := corev1.Container{Name: "app", Image: "registry.invalid/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: "/etc/x"}}}
	create(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: []corev1.Volume{{Name: "v", VolumeSource: f.bundleVolume()}}}})
	setStarted(t, f.ns, name, time.Now().Add(-time.Hour))
}

// TestDrivenRotationRollsBack: a server that does not pick up its new leaf
// holds switch-server-cert, named; rolled back, the Certificate gets its
// recorded issuer back, cert-manager issues a leaf of the old CA again, and
// only then the new CA leaves the bundle; no handshake fails.
func TestDrivenRotationRollsBack(t *testing.T) {
	f := newFleet(t)
	f.libraryClient("lib", true)
	f.frozen.Store(true)
	f.server()
	f.rotation(nil)
	runCensus(t)
	f.play()
	tr := waitRotation(t, f.name, "held at switch-server-cert", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseWaiting && tr.Status.Drive.Step == v1alpha1.StepSwitchServerCert &&
			len(tr.Status.ServerCertificates) == 1 && tr.Status.ServerCertificates[0].IssuedBy == "new"
	})
	if s := straggler(tr, "server"); s == nil || s.Evidence != v1alpha1.EvidenceServed || s.Step != v1alpha1.StepSwitchServerCert {
		t.Fatalf("the server is not named: %+v", tr.Status.Stragglers)
	}
	if f.issuerName() != "ca-2026" || len(tr.Status.Drive.Issuers) != 1 || tr.Status.Drive.Issuers[0].IssuerRef.Name != "ca-2025" {
		t.Fatalf("issuer %s, recorded %+v", f.issuerName(), tr.Status.Drive.Issuers)
	}
	tr.Spec.Drive.Action = v1alpha1.ActionRollback
	if err := env.Client().Update(testContext(t), tr); err != nil {
		t.Fatal(err)
	}
	tr = waitRotation(t, f.name, "rolled back", func(tr *v1alpha1.TrustRotation) bool { return drivePhase(tr) == v1alpha1.PhaseRolledBack })
	if f.issuerName() != "ca-2025" {
		t.Fatalf("the Certificate's issuer is %s after the rollback", f.issuerName())
	}
	if got := f.configMap().Data["ca.crt"]; got != string(f.ca2025.CertPEM) {
		t.Fatalf("the bundle after the rollback:\n%s", got)
	}
	rb := stepOf(tr, v1alpha1.StepRollback)
	if rb.CanaryWritten == nil || rb.Written == nil || rb.Written.Before(rb.CanaryWritten) {
		t.Fatalf("rollback progress %+v", rb)
	}
	if n := f.failed.Load(); n != 0 {
		t.Fatalf("%d of %d handshakes failed, the last: %s", n, f.handshakes.Load(), *f.lastFailure.Load())
	}
	t.Logf("rolled back; %d handshakes, 0 failed", f.handshakes.Load())
}

// TestDrivenRotationNeedsTheControllersOptIn: a controller without
// Options.Drive (--census-drive) observes a rotation in mode Drive, says
// so, and writes nothing.
func TestDrivenRotationNeedsTheControllersOptIn(t *testing.T) {
	f := newFleet(t)
	f.libraryClient("lib", true)
	f.rotation(nil)
	rv := f.configMap().ResourceVersion
	runCensusDriving(t, false)
	tr := waitRotation(t, f.name, "observed", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Drive != nil && tr.Status.Consumers.Total == 1
	})
	time.Sleep(time.Second)
	if tr = rotation(t, f.name); tr.Status.Drive.Message != census.NotDriving || len(tr.Status.Drive.Steps) != 0 {
		t.Fatalf("drive status %+v", tr.Status.Drive)
	}
	if now := f.configMap().ResourceVersion; now != rv {
		t.Fatalf("the bundle was written (resourceVersion %s, then %s)", rv, now)
	}
}

// TestDrivenRotationResumesInEveryStep: the controller is stopped in the
// middle of each step — after the step's write, before the census proves
// it — and a new one started: each step is started, written and done once,
// the restart-only consumer rolled once per bundle write, the rotation
// completes, and no handshake fails.
func TestDrivenRotationResumesInEveryStep(t *testing.T) {
	f := newFleet(t)
	f.libraryClient("lib", true)
	f.deployment("legacy", true)
	f.server()
	f.rotation(nil)
	f.holdIssue.Store(true) // switch-server-cert cannot be done before the restart
	stop := runCensus(t)
	f.play("legacy")
	for _, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
		tr := waitRotation(t, f.name, step+" written", func(tr *v1alpha1.TrustRotation) bool { return stepOf(tr, step).Written != nil })
		if stepOf(tr, step).Done != nil {
			t.Fatalf("%s was done before the restart: not a restart in the middle of it", step)
		}
		// The restart follows the write's Event: the recorder sends Events
		// after the status that tells of them, asynchronously, and one a
		// stopped process had not sent yet is lost with it (what this test
		// is about is the drive's resuming, not an Event's delivery).
		if n := countEvents(t, f.name, drive.EventWrote, step+":"); n != 1 {
			t.Fatalf("%d %s Events %q before the restart, want 1", n, drive.EventWrote, step+":")
		}
		stop()
		stop = runCensus(t)
		if step == v1alpha1.StepSwitchServerCert {
			f.holdIssue.Store(false) // cert-manager issues only once the switch is recorded written
		}
	}
	tr := waitRotation(t, f.name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseComplete || drivePhase(tr) == v1alpha1.PhaseStopped
	})
	if drivePhase(tr) != v1alpha1.PhaseComplete {
		t.Fatalf("stopped: %s", tr.Status.Drive.Message)
	}
	for _, c := range []struct{ reason, contains string }{{drive.EventWrote, "add-new-ca:"}, {drive.EventWrote, "remove-old-ca:"},
		{drive.EventWrote, "switch-server-cert: every Certificate"}, {drive.EventStarted, "step add-new-ca started"},
		{drive.EventStarted, "step switch-server-cert started"}, {drive.EventStarted, "step remove-old-ca started"},
		{drive.EventStepDone, "step add-new-ca proven"}, {drive.EventStepDone, "step switch-server-cert proven"}, {drive.EventStepDone, "step remove-old-ca proven"}} {
		if n := countEvents(t, f.name, c.reason, c.contains); n != 1 {
			t.Errorf("%d %s Events %q, want 1", n, c.reason, c.contains)
		}
	}
	if n := countEvents(t, f.name, census.EventRolled, "rolled Deployment "+f.ns+"/legacy"); n != 2 {
		t.Errorf("%d rolls, want 2", n)
	}
	if n := f.failed.Load(); n != 0 {
		t.Fatalf("%d of %d handshakes failed, the last: %s", n, f.handshakes.Load(), *f.lastFailure.Load())
	}
	t.Logf("three restarts, one in each step; %d handshakes, 0 failed", f.handshakes.Load())
}

// TestDrivenRotationCanary: with a canary (the Certificates labelled
// canary=true) and a soak, the canary is switched first; while its server
// does not serve the new leaf the rotation waits, naming it, and the rest
// are not switched; once the canary is proven and has soaked, the rest are.
func TestDrivenRotationCanary(t *testing.T) {
	f := newFleet(t)
	f.libraryClient("lib", true)
	f.certificate("cp2", "cp2-tls", nil)
	f.server()
	f.serverOf("cp2-tls", "server2")
	f.frozen.Store(true) // the canary's server does not reload at first
	f.rotation(func(s *v1alpha1.TrustRotationSpec) {
		s.ServerCertificates = append(s.ServerCertificates, v1alpha1.ServerCertificate{Namespace: f.ns, Name: "cp2-tls", Port: "https", ServerName: "cp.example"})
		s.Drive.Canary = &v1alpha1.Canary{Percent: 50, Soak: &metav1.Duration{Duration: 2 * time.Second}}
	})
	runCensus(t)
	f.play()
	tr := waitRotation(t, f.name, "the canary held", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepSwitchServerCert).CanaryWritten != nil && strings.Contains(tr.Status.Drive.Message, "waiting for the canary: pod "+f.ns+"/server:")
	})
	time.Sleep(time.Second)
	if a, b := f.issuerOf("cp"), f.issuerOf("cp2"); a != "ca-2026" || b != "ca-2025" {
		t.Fatalf("issuers cp %s, cp2 %s while the canary is not proven", a, b)
	}
	if i := tr.Status.Drive.Issuers; len(i) != 2 || !i[0].Canary || i[1].Canary {
		t.Fatalf("recorded issuers %+v", i)
	}
	f.frozen.Store(false) // the canary's server reloads
	tr = waitRotation(t, f.name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseComplete || drivePhase(tr) == v1alpha1.PhaseStopped
	})
	sw := stepOf(tr, v1alpha1.StepSwitchServerCert)
	if drivePhase(tr) != v1alpha1.PhaseComplete || sw.CanaryDone == nil || sw.Written.Sub(sw.CanaryDone.Time) < 2*time.Second {
		t.Fatalf("phase %s, switch %+v: the rest switched before the soak", drivePhase(tr), sw)
	}
	if f.issuerOf("cp2") != "ca-2026" {
		t.Fatalf("cp2 issued by %s", f.issuerOf("cp2"))
	}
	if n := f.failed.Load(); n != 0 {
		t.Fatalf("%d of %d handshakes failed, the last: %s", n, f.handshakes.Load(), *f.lastFailure.Load())
	}
	t.Logf("canary, soak 2s, then the rest; %d handshakes to 2 servers, 0 failed", f.handshakes.Load())
}

// TestDrivenRotationRollsOnlyOptedInWorkloads: the Deployment of a consumer
// that reads at start but is not opted in (hotcert.dev/rollout-on-change)
// is not rolled: a Warning names it, and the rotation waits on it.
func TestDrivenRotationRollsOnlyOptedInWorkloads(t *testing.T) {
	f := newFleet(t)
	f.deployment("manual", false)
	f.server()
	f.rotation(nil)
	runCensus(t)
	f.play("manual")
	waitRotation(t, f.name, "the Warning", func(*v1alpha1.TrustRotation) bool {
		return countEvents(t, f.name, census.EventNotRolled, "Deployment "+f.ns+"/manual (pod "+f.ns+"/manual reads at start) is not opted in") > 0
	})
	tr := rotation(t, f.name)
	if tr.Status.Drive.Step != v1alpha1.StepAddNewCA || !strings.Contains(tr.Status.Drive.Message, "manual") {
		t.Fatalf("drive %+v", tr.Status.Drive)
	}
	dep := &appsv1.Deployment{}
	if err := env.Client().Get(testContext(t), client.ObjectKey{Namespace: f.ns, Name: "manual"}, dep); err != nil {
		t.Fatal(err)
	}
	if got, ok := dep.Spec.Template.Annotations[census.AnnotationRotationRestart]; ok || f.restartCount.Load() != 0 {
		t.Fatalf("a Deployment not opted in was rolled (%q)", got)
	}
}
