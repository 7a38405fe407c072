package census_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

// The driven fleet: two namespaces, each with a control plane of two
// `hotcert server` replicas (a Deployment serving the cert-manager
// Certificate cp's Secret cp-tls), twenty `hotcert agent`s connected to
// them, and four restart-only python3 clients (an opted-in Deployment) that
// read their trust once, at start; trust-manager distributes the cluster CA
// bundle to both. 52 consumer processes in all.
const (
	// driveFleetControllerEnv, when set, makes the test binary run the
	// driving census controller against the kubeconfig file it names,
	// until it is killed (see TestMain).
	driveFleetControllerEnv = "HOTCERT_TEST_DRIVE_FLEET_CONTROLLER"
	dfServerName            = "cp.example"
	dfBundle                = "cluster-ca"        // the trust-manager Bundle, and its target ConfigMaps
	dfSource                = "cluster-ca-source" // the ConfigMap a driven rotation writes: the Bundle's source
	dfKey                   = "ca.crt"
	dfIssuer                = "cluster-ca" // the runbook's CA ClusterIssuer
	dfTargetLabel           = "hotcert.dev/cluster-ca"
	dfVolumeDelay           = time.Second            // the declared kubelet delay; the simulated kubelet keeps well under it
	dfCensusInterval        = 500 * time.Millisecond // the controller's census interval
	dfTick                  = 100 * time.Millisecond // the simulated kubelet's and cert-manager's period
	dfTimeout               = 2 * time.Minute
	// tmDir is where `make trust-manager` builds trust-manager and copies
	// the CRDs of trust-manager and cert-manager.
	tmDir = "../../.bin/trust-manager"
	// dfConsumers is how many consumers the census counts: one per pod
	// (the servers mount the Secret, the clients the bundle).
	dfConsumers = 2 * (2 + 20 + 4)
)

var (
	certificateGVK   = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	clusterIssuerGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}
	bundleGVK        = schema.GroupVersionKind{Group: "trust.cert-manager.io", Version: "v1alpha1", Kind: "Bundle"}
)

// runDriveFleetController is the child process: the census controller,
// driving, as hotcert-controller --census --census-drive runs it.
func runDriveFleetController(kubeconfig string) int {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	c, err := census.New(census.Options{Interval: dfCensusInterval, MinSpacing: 50 * time.Millisecond, Drive: true, Registerer: prometheus.NewRegistry()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: s, Cache: c.CacheOptions(cache.Options{}),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := c.SetupWithManager(mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// legacyScript is a restart-only client: it reads its trust once, at
// start, says which CAs it read, then handshakes with every server, again
// and again, printing each result.
const legacyScript = `
import socket, ssl, sys, time
ca, name, addrs = sys.argv[1], sys.argv[2], sys.argv[3:]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["h2"])
cns = sorted(v for c in ctx.get_ca_certs() for rdn in c["subject"] for k, v in rdn if k == "commonName")
print("trusts " + ",".join(cns), flush=True)
while True:
    for a in addrs:
        host, port = a.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                with ctx.wrap_socket(s, server_hostname=name):
                    pass
            print("ok", flush=True)
        except Exception as e:
            print("fail %s %s" % (a, e), flush=True)
    time.sleep(0.5)
`

// driveWorld is the cluster of the driven fleet: a real API server,
// controller manager and trust-manager, a real Prometheus, the fleet's
// processes, and the test playing the kubelet (volumes, pod status, the
// processes of the pods the ReplicaSets create), the EndpointSlice
// controller and cert-manager.
type driveWorld struct {
	tb         testing.TB
	env        *kubetest.Env
	ip         string
	dir        string
	hotcert    string
	script     string
	kubeconfig string
	trustNS    string
	nss        []string
	prom       string
	targets    string // Prometheus's file_sd file

	// holdIssue: cert-manager issues nothing while set.
	holdIssue atomic.Bool
	// rot is the driven rotation under way (nil: none), for the gate
	// checks of the simulated cert-manager and kubelet.
	rot atomic.Pointer[dfRotation]

	mu         sync.Mutex
	cas        []*hotcerttest.CA // CA-2025, CA-2026, … (made as needed)
	pods       map[string]*simPod
	volumes    map[string]*hotcerttest.AtomicWriter
	servers    map[string][]string // namespace -> its servers' addresses
	started    int                 // processes started
	violations []string
	lastFail   string
	legacyOK   int64
	legacyFail int64
	issuers    map[string]string // Certificate -> the issuer it was last seen with
	sourceOld  bool              // the driven source ConfigMap held the old CA when last seen
}

// dfRotation is a rotation from old to new.
type dfRotation struct{ old, new *hotcerttest.CA }

// simPod is a pod the simulated kubelet runs.
type simPod struct {
	ns, name, app string
	proc          *child
	addr          string   // cp: its gRPC listener
	metrics       string   // cp, agent: its /metrics address
	trusts        []string // legacy: the CAs it read at start
	ready         chan struct{}
}

func newDriveWorld(tb testing.TB) *driveWorld {
	tb.Helper()
	for _, f := range []string{"trust-manager", "crds/trust.cert-manager.io_bundles.yaml", "crds/cert-manager.io_certificates.yaml", "crds/cert-manager.io_issuers.yaml"} {
		if _, err := os.Stat(filepath.Join(tmDir, f)); err != nil {
			tb.Fatalf("trust-manager is not built (%v): run `make trust-manager`", err)
		}
	}
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		tb.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		tb.Fatal(err)
	}
	env := kubetest.Start(tb, kubetest.WithScheme(s), kubetest.WithControllerManager(),
		kubetest.WithCRDPaths("../api/v1alpha1/crd", filepath.Join(tmDir, "crds", "trust.cert-manager.io_bundles.yaml"),
			filepath.Join(tmDir, "crds", "cert-manager.io_certificates.yaml"), filepath.Join(tmDir, "crds", "cert-manager.io_issuers.yaml")),
		kubetest.WithCRDs(clusterIssuerCRD(tb)))
	w := &driveWorld{tb: tb, env: env, ip: hostIP(tb), dir: tb.TempDir(), hotcert: buildHotcert(tb),
		pods: map[string]*simPod{}, volumes: map[string]*hotcerttest.AtomicWriter{}, servers: map[string][]string{}, issuers: map[string]string{}}
	w.kubeconfig = filepath.Join(w.dir, "kubeconfig")
	w.script = filepath.Join(w.dir, "legacy.py")
	for name, data := range map[string][]byte{w.kubeconfig: env.KubeConfig(), w.script: []byte(legacyScript)} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	w.trustNS = env.NewNamespace(tb)
	for range 2 {
		ns := env.NewNamespace(tb)
		n := &corev1.Namespace{}
		w.get(client.ObjectKey{Name: ns}, n)
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[dfTargetLabel] = "true"
		w.update(n)
		w.nss = append(w.nss, ns)
	}

	// Before any rotation, as the runbook has it: CA-2025 in a Secret of
	// the cluster resource namespace (trust-manager's trust namespace), the
	// CA ClusterIssuer cluster-ca signing with it, the Bundle distributing
	// it, a Certificate per control plane.
	w.createCASecret(w.ca(0))
	w.create(w.clusterIssuer(dfIssuer, w.ca(0)))
	w.applyBundle(map[string]any{"secret": map[string]any{"name": caSecret(w.ca(0)), "key": "tls.crt"}})
	for _, ns := range w.nss {
		w.create(&unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
			"metadata": map[string]any{"namespace": ns, "name": "cp"},
			"spec": map[string]any{"secretName": "cp-tls", "dnsNames": []any{dfServerName},
				"issuerRef": map[string]any{"name": dfIssuer, "kind": "ClusterIssuer", "group": "cert-manager.io"}}}})
	}

	w.runTrustManager()
	w.startPrometheus()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.playKubelet(ctx) })
	wg.Go(func() { w.playCertManager(ctx) })
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		w.mu.Lock()
		pods := w.pods
		w.pods = nil
		w.mu.Unlock()
		for _, p := range pods {
			p.proc.kill()
		}
	})

	// The Deployments: the servers first (the clients are given their
	// addresses), then the clients.
	for _, ns := range w.nss {
		w.deployment(ns, "cp", 2)
	}
	w.waitRunning("the servers", 4)
	for _, ns := range w.nss {
		w.deployment(ns, "agent", 20)
		w.deployment(ns, "legacy", 4)
	}
	w.waitRunning("the fleet", dfConsumers)
	w.waitFor("Prometheus scraping every server and agent", func() bool {
		return w.promValue(`count(up == 1)`) == 2*(2+20)
	})
	return w
}

// clusterIssuerCRD is cert-manager's ClusterIssuer CRD: generated from the
// same types as Issuer's, at cluster scope.
func clusterIssuerCRD(tb testing.TB) *apiextensionsv1.CustomResourceDefinition {
	data, err := os.ReadFile(filepath.Join(tmDir, "crds", "cert-manager.io_issuers.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		tb.Fatal(err)
	}
	crd.Name = "clusterissuers.cert-manager.io"
	crd.Spec.Scope = apiextensionsv1.ClusterScoped
	crd.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterissuers", Singular: "clusterissuer", Kind: "ClusterIssuer", ListKind: "ClusterIssuerList"}
	return crd
}

// ca returns the i-th CA (CA-2025 is the 0th).
func (w *driveWorld) ca(i int) *hotcerttest.CA {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.cas) <= i {
		w.cas = append(w.cas, hotcerttest.MustNewCA(hotcerttest.WithCommonName(fmt.Sprintf("CA-%d", 2025+len(w.cas)))))
	}
	return w.cas[i]
}

// caSecret names the CA's Secret, and its ClusterIssuer in a driven
// rotation: cluster-ca-2026.
func caSecret(ca *hotcerttest.CA) string {
	return "cluster-" + strings.ToLower(ca.Cert.Subject.CommonName)
}

func (w *driveWorld) createCASecret(ca *hotcerttest.CA) {
	w.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.trustNS, Name: caSecret(ca)}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": ca.KeyPEM}})
}

func (w *driveWorld) clusterIssuer(name string, ca *hotcerttest.CA) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
		"metadata": map[string]any{"name": name}, "spec": map[string]any{"ca": map[string]any{"secretName": caSecret(ca)}}}}
}

// applyBundle creates or updates the Bundle with sources.
func (w *driveWorld) applyBundle(sources ...any) {
	w.tb.Helper()
	b := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "trust.cert-manager.io/v1alpha1", "kind": "Bundle",
		"metadata": map[string]any{"name": dfBundle},
		"spec": map[string]any{"sources": sources, "target": map[string]any{"configMap": map[string]any{"key": dfKey},
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{dfTargetLabel: "true"}}}}}}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(bundleGVK)
	if err := w.env.Client().Get(context.Background(), client.ObjectKey{Name: dfBundle}, cur); err == nil {
		b.SetResourceVersion(cur.GetResourceVersion())
		w.update(b)
		return
	}
	w.create(b)
}

// runTrustManager runs trust-manager, its trust namespace the cluster
// resource namespace, until the test ends.
func (w *driveWorld) runTrustManager() {
	certDir := filepath.Join(w.dir, "trust-manager-tls")
	if err := os.Mkdir(certDir, 0o700); err != nil {
		w.tb.Fatal(err)
	}
	serving := hotcerttest.MustNewCA().MustIssue(hotcerttest.WithIPAddresses(net.IPv4(127, 0, 0, 1)))
	for name, data := range map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
			w.tb.Fatal(err)
		}
	}
	lo := "127.0.0.1"
	p := w.spawn("trust-manager", filepath.Join(tmDir, "trust-manager"), []string{"--kubeconfig=" + w.kubeconfig, "--trust-namespace=" + w.trustNS,
		"--leader-elect=false", "--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(testutil.FreePort(w.tb, lo)), "--webhook-certificate-dir=" + certDir,
		"--metrics-port=" + strconv.Itoa(testutil.FreePort(w.tb, lo)), "--readiness-probe-port=" + strconv.Itoa(testutil.FreePort(w.tb, lo)), "--log-level=1"}, nil)
	w.tb.Cleanup(p.kill)
}

// startPrometheus runs a real Prometheus scraping, every second, the pods
// of its file_sd file (which the simulated kubelet keeps as kubernetes_sd
// would: every running pod with a metrics port, labelled namespace and pod).
func (w *driveWorld) startPrometheus() {
	w.targets = filepath.Join(w.dir, "targets.json")
	w.writeTargets()
	cfg := filepath.Join(w.dir, "prometheus.yml")
	conf := "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n- job_name: pods\n  file_sd_configs: [{files: [" + strconv.Quote(w.targets) + "], refresh_interval: 1s}]\n"
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		w.tb.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePort(w.tb, "127.0.0.1")))
	path, err := exec.LookPath("prometheus")
	if err != nil {
		w.tb.Fatalf("prometheus is not installed (hack/tools.sh installs it): %v", err)
	}
	p := w.spawn("prometheus", path, []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(w.dir, "prometheus"), "--web.listen-address=" + addr, "--log.level=warn"}, nil)
	w.tb.Cleanup(p.kill)
	w.prom = "http://" + addr
	w.waitFor("Prometheus ready", func() bool {
		resp, err := http.Get(w.prom + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// writeTargets rewrites the file_sd file (atomically, as Prometheus wants).
func (w *driveWorld) writeTargets() {
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	groups := []group{}
	w.mu.Lock()
	for _, p := range w.pods {
		select {
		case <-p.ready:
		default:
			continue
		}
		if p.metrics != "" {
			groups = append(groups, group{Targets: []string{p.metrics}, Labels: map[string]string{"namespace": p.ns, "pod": p.name}})
		}
	}
	data, err := json.Marshal(groups)
	if err == nil {
		tmp := w.targets + ".tmp"
		if err = os.WriteFile(tmp, data, 0o600); err == nil {
			err = os.Rename(tmp, w.targets)
		}
	}
	w.mu.Unlock()
	if err != nil {
		w.violation("writing Prometheus's targets: %v", err)
	}
}

// deployment creates a Deployment of replicas pods of app, their one
// container mounting what app consumes; the restart-only clients' is
// opted in to the rollout controller.
func (w *driveWorld) deployment(ns, app string, replicas int32) {
	labels := map[string]string{"app": app}
	vol := corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: dfBundle}}}}
	if app == "cp" {
		vol = corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "cp-tls"}}}
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/" + app + ":1", VolumeMounts: []corev1.VolumeMount{{Name: vol.Name, MountPath: "/etc/" + vol.Name}}}},
			Volumes:    []corev1.Volume{vol}}}}}
	if app == "legacy" {
		dep.Annotations = map[string]string{"hotcert.dev/rollout-on-change": "true"}
	}
	w.create(dep)
}

// playKubelet runs, every dfTick: the volumes (the bundle's ConfigMap and
// the server certificate Secret of each namespace, written as the kubelet
// writes them), the pods (a process started for each pod the ReplicaSets
// create, its status written as the kubelet writes it; the process of a
// deleted pod killed) and the servers' EndpointSlices.
func (w *driveWorld) playKubelet(ctx context.Context) {
	for ctx.Err() == nil {
		for _, ns := range w.nss {
			cm := &corev1.ConfigMap{}
			if w.env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: dfBundle}, cm) == nil {
				w.volume(ns, dfBundle).MustWrite(map[string][]byte{dfKey: []byte(cm.Data[dfKey])})
			}
			s := &corev1.Secret{}
			if w.env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "cp-tls"}, s) == nil {
				w.volume(ns, "cp-tls").MustWrite(map[string][]byte{"tls.crt": s.Data["tls.crt"], "tls.key": s.Data["tls.key"]})
			}
			list := &corev1.PodList{}
			if w.env.Client().List(ctx, list, client.InNamespace(ns)) != nil {
				continue
			}
			live := map[string]bool{}
			for i := range list.Items {
				pod := &list.Items[i]
				key := ns + "/" + pod.Name
				live[key] = true
				w.mu.Lock()
				_, running := w.pods[key]
				w.mu.Unlock()
				if !running && pod.DeletionTimestamp == nil {
					w.run(ctx, pod)
				}
			}
			var gone []*simPod
			w.mu.Lock()
			for key, p := range w.pods {
				if p.ns == ns && !live[key] {
					gone = append(gone, p)
					delete(w.pods, key)
				}
			}
			w.mu.Unlock()
			for _, p := range gone {
				p.proc.kill()
			}
			if len(gone) > 0 {
				w.writeTargets()
			}
		}
		w.checkSource(ctx)
		time.Sleep(dfTick)
	}
}

func (w *driveWorld) volume(ns, name string) *hotcerttest.AtomicWriter {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.volumes[ns+"/"+name]
	if !ok {
		v = hotcerttest.MustNewAtomicWriter(filepath.Join(w.dir, "volumes", ns, name))
		w.volumes[ns+"/"+name] = v
	}
	return v
}

// run starts the process of pod, once its volume is there, and reports it
// running once it runs.
func (w *driveWorld) run(ctx context.Context, pod *corev1.Pod) {
	app := pod.Labels["app"]
	vol := dfBundle
	if app == "cp" {
		vol = "cp-tls"
	}
	dir := w.volume(pod.Namespace, vol).Dir()
	if _, err := os.Stat(filepath.Join(dir, "..data")); err != nil {
		return // not written yet: the kubelet waits for the volume
	}
	w.mu.Lock()
	addrs := slices.Clone(w.servers[pod.Namespace])
	n := w.started
	w.started++
	w.mu.Unlock()
	if app != "cp" && len(addrs) < 2 {
		return // the clients start once the servers run
	}
	p := &simPod{ns: pod.Namespace, name: pod.Name, app: app, ready: make(chan struct{})}
	started := time.Now()
	switch app {
	case "cp":
		p.addr = net.JoinHostPort(w.ip, strconv.Itoa(testutil.FreePort(w.tb, w.ip)))
		p.metrics = net.JoinHostPort(w.ip, strconv.Itoa(testutil.FreePort(w.tb, w.ip)))
		p.proc = w.spawn(pod.Name, w.hotcert, []string{"server", "--cert-file", filepath.Join(dir, "tls.crt"), "--key-file", filepath.Join(dir, "tls.key"),
			"--listen", p.addr, "--metrics-bind-address", p.metrics, "--replica", pod.Name, "--max-connection-age", "2s", "--max-connection-age-grace", "1s",
			"--drain-window", "1s", "--poll-interval", "1s", "--log-level", "warn"}, nil)
	case "agent":
		p.metrics = net.JoinHostPort(w.ip, strconv.Itoa(testutil.FreePort(w.tb, w.ip)))
		p.proc = w.spawn(pod.Name, w.hotcert, []string{"agent", "--server", addrs[n%len(addrs)], "--server-name", dfServerName,
			"--ca-file", filepath.Join(dir, dfKey), "--metrics-bind-address", p.metrics, "--id", pod.Name,
			"--reconnect-jitter", "200ms", "--min-backoff", "200ms", "--log-level", "warn"}, nil)
	case "legacy":
		trusts := make(chan []string, 1)
		p.proc = w.spawn(pod.Name, "python3", append([]string{w.script, filepath.Join(dir, dfKey), dfServerName}, addrs...), func(line string) {
			w.mu.Lock()
			defer w.mu.Unlock()
			switch {
			case strings.HasPrefix(line, "trusts "):
				trusts <- strings.Split(strings.TrimPrefix(line, "trusts "), ",")
			case line == "ok":
				w.legacyOK++
			case strings.HasPrefix(line, "fail "):
				w.legacyFail++
				w.lastFail = pod.Name + ": " + line
			}
		})
		go func() {
			select {
			case t := <-trusts:
				w.mu.Lock()
				p.trusts = t
				w.mu.Unlock()
				w.ready(ctx, p, pod, started)
			case <-ctx.Done():
			}
		}()
	default:
		w.violation("pod %s/%s of no known app", pod.Namespace, pod.Name)
		return
	}
	w.mu.Lock()
	w.pods[pod.Namespace+"/"+pod.Name] = p
	w.mu.Unlock()
	if app != "legacy" {
		go func() {
			if waitDialable(ctx, p.metrics) && (p.addr == "" || waitDialable(ctx, p.addr)) {
				w.ready(ctx, p, pod, started)
			}
		}()
	}
}

// ready writes the pod's status as the kubelet does once its container
// runs (started at started), and for a server its EndpointSlice.
func (w *driveWorld) ready(ctx context.Context, p *simPod, pod *corev1.Pod, started time.Time) {
	cur := &corev1.Pod{}
	if err := w.env.Client().Get(ctx, client.ObjectKeyFromObject(pod), cur); err != nil {
		return // deleted meanwhile
	}
	now := metav1.Now()
	cur.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: w.ip, PodIPs: []corev1.PodIP{{IP: w.ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr.To(true), Image: cur.Spec.Containers[0].Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}
	if err := w.env.Client().Status().Update(ctx, cur); err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			w.violation("writing the status of pod %s/%s: %v", p.ns, p.name, err)
		}
		if apierrors.IsConflict(err) {
			w.ready(ctx, p, pod, started)
		}
		return
	}
	if p.app == "cp" {
		_, port, _ := net.SplitHostPort(p.addr)
		n, _ := strconv.Atoi(port)
		es := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: map[string]string{discoveryv1.LabelServiceName: "cp"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: cur.Name, UID: cur.UID}}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{w.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: p.ns, Name: p.name}}},
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To(int32(n)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		if err := w.env.Client().Create(ctx, es); err != nil && ctx.Err() == nil {
			w.violation("creating the EndpointSlice of %s/%s: %v", p.ns, p.name, err)
		}
		w.mu.Lock()
		w.servers[p.ns] = append(w.servers[p.ns], p.addr)
		w.mu.Unlock()
	}
	close(p.ready)
	w.writeTargets()
}

func waitDialable(ctx context.Context, addr string) bool {
	for ctx.Err() == nil {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// playCertManager runs, every dfTick, what cert-manager does here: a
// ClusterIssuer is Ready once its CA Secret is there; a Certificate is
// issued (by the CA of its issuer's Secret, into its Secret) when its
// Secret is missing, was issued by another issuer than its issuerRef
// names, or a renewal is asked for (the Issuing condition, which cmctl
// renew sets).
func (w *driveWorld) playCertManager(ctx context.Context) {
	for ctx.Err() == nil {
		issuers := &unstructured.UnstructuredList{}
		issuers.SetGroupVersionKind(clusterIssuerGVK.GroupVersion().WithKind("ClusterIssuerList"))
		if w.env.Client().List(ctx, issuers) == nil {
			for i := range issuers.Items {
				w.issuerReady(ctx, &issuers.Items[i])
			}
		}
		for _, ns := range w.nss {
			certs := &unstructured.UnstructuredList{}
			certs.SetGroupVersionKind(certificateGVK.GroupVersion().WithKind("CertificateList"))
			if w.env.Client().List(ctx, certs, client.InNamespace(ns)) != nil {
				continue
			}
			for i := range certs.Items {
				w.issue(ctx, &certs.Items[i])
			}
		}
		time.Sleep(dfTick)
	}
}

func (w *driveWorld) issuerReady(ctx context.Context, u *unstructured.Unstructured) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" && m["observedGeneration"] == u.GetGeneration() {
			return
		}
	}
	if w.caOfIssuer(ctx, u.GetName()) == nil {
		return
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "KeyPairVerified",
		"message": "Signing CA verified", "observedGeneration": u.GetGeneration(), "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
	_ = w.env.Client().Status().Update(ctx, u)
}

// caOfIssuer is the CA of ClusterIssuer name's Secret (nil: none).
func (w *driveWorld) caOfIssuer(ctx context.Context, name string) *hotcerttest.CA {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(clusterIssuerGVK)
	if w.env.Client().Get(ctx, client.ObjectKey{Name: name}, u) != nil {
		return nil
	}
	secretName, _, _ := unstructured.NestedString(u.Object, "spec", "ca", "secretName")
	s := &corev1.Secret{}
	if w.env.Client().Get(ctx, client.ObjectKey{Namespace: w.trustNS, Name: secretName}, s) != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ca := range w.cas {
		if bytes.Equal(ca.CertPEM, s.Data["tls.crt"]) && bytes.Equal(ca.KeyPEM, s.Data["tls.key"]) {
			return ca
		}
	}
	return nil
}

func (w *driveWorld) issue(ctx context.Context, u *unstructured.Unstructured) {
	key := u.GetNamespace() + "/" + u.GetName()
	ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "issuerRef")
	w.mu.Lock()
	switched := w.issuers[key] != "" && w.issuers[key] != ref["name"]
	w.issuers[key] = ref["name"]
	w.mu.Unlock()
	if r := w.rot.Load(); switched && r != nil {
		// The controller switched the issuer: only once every consumer of
		// the bundle trusts the new CA.
		if why := w.unproven(ctx, v1alpha1.StepAddNewCA, r); len(why) > 0 {
			w.violation("Certificate %s switched to %s while %s", key, ref["name"], strings.Join(why, "; "))
		}
	}
	if w.holdIssue.Load() {
		return
	}
	renew := false
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Issuing" && m["status"] == "True" {
			renew = true
		}
	}
	secretName, _, _ := unstructured.NestedString(u.Object, "spec", "secretName")
	s := &corev1.Secret{}
	err := w.env.Client().Get(ctx, client.ObjectKey{Namespace: u.GetNamespace(), Name: secretName}, s)
	if err != nil && !apierrors.IsNotFound(err) {
		return
	}
	if err == nil && !renew && s.Annotations["cert-manager.io/issuer-name"] == ref["name"] && s.Annotations["cert-manager.io/issuer-kind"] == ref["kind"] {
		return
	}
	ca := w.caOfIssuer(ctx, ref["name"])
	if ca == nil {
		return
	}
	leaf := ca.MustIssue(hotcerttest.WithDNSNames(dfServerName))
	ann := map[string]string{"cert-manager.io/issuer-name": ref["name"], "cert-manager.io/issuer-kind": ref["kind"], "cert-manager.io/issuer-group": ref["group"],
		"cert-manager.io/certificate-name": u.GetName()}
	data := map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}
	if apierrors.IsNotFound(err) {
		err = w.env.Client().Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: secretName, Annotations: ann},
			Type: corev1.SecretTypeTLS, Data: data})
	} else {
		s.Annotations, s.Data = ann, data
		err = w.env.Client().Update(ctx, s)
	}
	if err != nil {
		return // the next tick tries again
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready",
		"message": "Certificate is up to date and has not expired", "observedGeneration": u.GetGeneration(),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions")
	_ = w.env.Client().Status().Update(ctx, u)
}

// checkSource checks, when the driven rotation's bundle loses the old CA,
// that it may: every server serves a leaf of the new CA, and every consumer
// trusts it.
func (w *driveWorld) checkSource(ctx context.Context) {
	r := w.rot.Load()
	if r == nil {
		return
	}
	cm := &corev1.ConfigMap{}
	if w.env.Client().Get(ctx, client.ObjectKey{Namespace: w.trustNS, Name: dfSource}, cm) != nil {
		return
	}
	holdsOld := strings.Contains(cm.Data[dfKey], string(bytes.TrimSpace(r.old.CertPEM)))
	w.mu.Lock()
	removed := w.sourceOld && !holdsOld
	w.sourceOld = holdsOld
	w.mu.Unlock()
	if removed {
		if why := w.unproven(ctx, v1alpha1.StepSwitchServerCert, r); len(why) > 0 {
			w.violation("%s removed from the bundle while %s", r.old.Cert.Subject.CommonName, strings.Join(why, "; "))
		}
	}
}

// unproven is the ground truth of step for rotation r: the consumers (of
// the pods that exist now) that do not hold what step needs, each with
// what it holds. Agents say what they trust on their /metrics, the
// restart-only clients said it at start, the servers are asked with a
// handshake.
func (w *driveWorld) unproven(ctx context.Context, step string, r *dfRotation) []string {
	var out []string
	newCN, oldCN := r.new.Cert.Subject.CommonName, r.old.Cert.Subject.CommonName
	for _, p := range w.livePods(ctx) {
		switch p.app {
		case "cp":
			if step == v1alpha1.StepAddNewCA {
				continue
			}
			if issuer, err := servedIssuer(p.addr, r.old, r.new); err != nil || issuer != newCN {
				out = append(out, fmt.Sprintf("server %s serves a leaf of %q (%v)", p.name, issuer, err))
			}
		default:
			w.mu.Lock()
			trusts := p.trusts
			w.mu.Unlock()
			if p.app == "agent" {
				var err error
				if trusts, err = agentTrusts(p.metrics); err != nil {
					out = append(out, fmt.Sprintf("agent %s: %v", p.name, err))
					continue
				}
			}
			if !slices.Contains(trusts, newCN) || step == v1alpha1.StepRemoveOldCA && slices.Contains(trusts, oldCN) {
				out = append(out, fmt.Sprintf("%s %s trusts %v", p.app, p.name, trusts))
			}
		}
	}
	return out
}

// livePods are the running processes of the pods that exist now.
func (w *driveWorld) livePods(ctx context.Context) []*simPod {
	var out []*simPod
	for _, ns := range w.nss {
		list := &corev1.PodList{}
		if err := w.env.Client().List(ctx, list, client.InNamespace(ns)); err != nil {
			if ctx.Err() == nil {
				w.violation("listing pods: %v", err)
			}
			return nil
		}
		w.mu.Lock()
		for _, pod := range list.Items {
			if p := w.pods[ns+"/"+pod.Name]; p != nil && pod.DeletionTimestamp == nil {
				select {
				case <-p.ready:
					out = append(out, p)
				default:
				}
			}
		}
		w.mu.Unlock()
	}
	return out
}

// servedIssuer is the common name of the issuer of the leaf addr serves
// (verified against cas, and for the server name).
func servedIssuer(addr string, cas ...*hotcerttest.CA) (string, error) {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: dfServerName, NextProtos: []string{"h2"}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
}

// agentTrusts reads the CAs an agent trusts from its metrics.
func agentTrusts(addr string) ([]string, error) {
	var out []string
	err := scrape(addr, func(name string, labels map[string]string, _ float64) {
		if name == "hotcert_tls_ca_certificate_info" {
			out = append(out, strings.TrimPrefix(labels["subject"], "CN="))
		}
	})
	slices.Sort(out)
	return out, err
}

// scrape reads the metrics on addr, calling f for each sample.
func scrape(addr string, f func(name string, labels map[string]string, v float64)) error {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, labels := line, "", map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			name, value = line[:i], line[j+1:]
			for _, kv := range strings.Split(line[i+1:j], "\",") {
				if k, v, ok := strings.Cut(kv, "=\""); ok {
					labels[k] = strings.TrimSuffix(v, "\"")
				}
			}
		} else {
			name, value, _ = strings.Cut(line, " ")
		}
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		f(name, labels, v)
	}
	return nil
}

// handshakes counts every client's handshakes so far: the agents' (their
// metrics: TLS handshakes, and failed connection attempts of any kind) and
// the restart-only clients' (their output, dead or alive); fewest is the
// fewest successful ones of a running agent.
func (w *driveWorld) handshakes(ctx context.Context) (ok, failed, fewest int64, last string) {
	fewest = -1
	for _, p := range w.livePods(ctx) {
		if p.app != "agent" {
			continue
		}
		var mine int64
		if err := scrape(p.metrics, func(name string, labels map[string]string, v float64) {
			switch {
			case name == "hotcert_agent_tls_handshakes_total" && labels["result"] == "success":
				mine += int64(v)
			case name == "hotcert_agent_tls_handshakes_total" || name == "hotcert_agent_connect_failures_total":
				failed += int64(v)
				if v > 0 {
					last = fmt.Sprintf("agent %s: %s%v %v", p.name, name, labels, v)
				}
			}
		}); err != nil {
			w.violation("scraping agent %s: %v", p.name, err)
		}
		ok += mine
		if fewest < 0 || mine < fewest {
			fewest = mine
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.legacyFail > 0 {
		last = w.lastFail
	}
	return ok + w.legacyOK, failed + w.legacyFail, fewest, last
}

func (w *driveWorld) violation(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Sprintf(format, args...))
}

func (w *driveWorld) checkViolations() {
	w.tb.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.violations) > 0 {
		w.tb.Fatalf("%d violations:\n%s", len(w.violations), strings.Join(w.violations, "\n"))
	}
}

// watchGates checks, until the returned stop is called, every gate of
// rotation name against the ground truth the moment it is seen open: a
// step's condition (and a driven step's done) never turns true while a
// consumer does not hold what the step needs.
func (w *driveWorld) watchGates(name string, r *dfRotation) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		seen := map[string]bool{}
		for ctx.Err() == nil {
			tr := &v1alpha1.TrustRotation{}
			if w.env.Client().Get(ctx, client.ObjectKey{Name: name}, tr) == nil {
				for _, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
					c := meta.FindStatusCondition(tr.Status.Conditions, step)
					open := c != nil && c.Status == metav1.ConditionTrue || stepOf(tr, step).Done != nil
					if open && !seen[step] {
						seen[step] = true
						if why := w.unproven(ctx, step, r); len(why) > 0 && ctx.Err() == nil {
							w.violation("%s open while %s", step, strings.Join(why, "; "))
						}
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// child is a process of the fleet.
type child struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	tail   []string
	done   chan struct{}
	killed atomic.Bool
}

// spawn starts a process; onLine, if set, gets each line of its output. A
// process that exits before it is killed is a violation.
func (w *driveWorld) spawn(name, path string, args []string, onLine func(string)) *child {
	c := &child{cmd: exec.Command(path, args...), done: make(chan struct{})}
	pr, pw := io.Pipe()
	c.cmd.Stdout, c.cmd.Stderr = pw, pw
	if err := c.cmd.Start(); err != nil {
		// Not Fatal: the simulated kubelet calls this off the test's goroutine.
		w.violation("starting %s: %v", name, err)
		c.killed.Store(true)
		close(c.done)
		return c
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			if onLine != nil {
				onLine(line)
			}
			c.mu.Lock()
			if c.tail = append(c.tail, line); len(c.tail) > 20 {
				c.tail = c.tail[1:]
			}
			c.mu.Unlock()
		}
	}()
	go func() {
		err := c.cmd.Wait()
		pw.Close()
		<-lines
		if !c.killed.Load() {
			c.mu.Lock()
			w.violation("%s exited: %v\n%s", name, err, strings.Join(c.tail, "\n"))
			c.mu.Unlock()
		}
		close(c.done)
	}()
	return c
}

// kill kills the process (SIGKILL: nothing of it runs after) and waits.
func (c *child) kill() {
	if c == nil || c.killed.Swap(true) {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// startController runs the driving census controller in a child process
// (this test binary, see TestMain), until killed or the test ends.
func (w *driveWorld) startController() *child {
	exe, err := os.Executable()
	if err != nil {
		w.tb.Fatal(err)
	}
	c := &child{cmd: exec.Command(exe), done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), driveFleetControllerEnv+"="+w.kubeconfig)
	var out bytes.Buffer
	c.cmd.Stdout, c.cmd.Stderr = &out, &out
	if err := c.cmd.Start(); err != nil {
		w.tb.Fatal(err)
	}
	go func() {
		err := c.cmd.Wait()
		if !c.killed.Load() {
			w.violation("the controller exited: %v\n%s", err, out.String())
		}
		close(c.done)
	}()
	w.tb.Cleanup(c.kill)
	return c
}

func (w *driveWorld) waitRunning(what string, n int) {
	w.tb.Helper()
	w.waitFor(what+" running", func() bool { return len(w.livePods(context.Background())) == n })
}

func (w *driveWorld) waitFor(what string, cond func() bool) {
	w.tb.Helper()
	deadline := time.Now().Add(dfTimeout)
	for !cond() {
		w.checkViolations()
		if time.Now().After(deadline) {
			w.tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRotation polls the TrustRotation until cond holds.
func (w *driveWorld) waitRotation(name, what string, cond func(*v1alpha1.TrustRotation) bool) *v1alpha1.TrustRotation {
	w.tb.Helper()
	var tr *v1alpha1.TrustRotation
	deadline := time.Now().Add(dfTimeout)
	for {
		tr = &v1alpha1.TrustRotation{}
		if w.env.Client().Get(context.Background(), client.ObjectKey{Name: name}, tr) == nil && cond(tr) {
			return tr
		}
		w.checkViolations()
		if time.Now().After(deadline) {
			w.tb.Fatalf("timed out waiting for %s; status %+v; drive %+v", what, tr.Status, tr.Status.Drive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (w *driveWorld) promValue(query string) float64 {
	resp, err := http.Get(w.prom + "/api/v1/query?query=" + strings.ReplaceAll(query, " ", "%20"))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Data.Result) != 1 {
		return -1
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

func (w *driveWorld) get(key client.ObjectKey, obj client.Object) {
	w.tb.Helper()
	if err := w.env.Client().Get(context.Background(), key, obj); err != nil {
		w.tb.Fatal(err)
	}
}

func (w *driveWorld) create(obj client.Object) {
	w.tb.Helper()
	if err := w.env.Client().Create(context.Background(), obj); err != nil {
		w.tb.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (w *driveWorld) update(obj client.Object) {
	w.tb.Helper()
	if err := w.env.Client().Update(context.Background(), obj); err != nil {
		w.tb.Fatalf("updating %T %s: %v", obj, obj.GetName(), err)
	}
}

// countEvents counts the Events of reason on TrustRotation name whose
// message holds contains.
func (w *driveWorld) countEvents(name, reason, contains string) int {
	w.tb.Helper()
	list := &corev1.EventList{}
	if err := w.env.Client().List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		w.tb.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason && strings.Contains(e.Message, contains) {
			n += max(int(e.Count), 1)
		}
	}
	return n
}

// targetsHold says whether every target ConfigMap holds exactly cas.
func (w *driveWorld) targetsHold(cas ...*hotcerttest.CA) bool {
	for _, ns := range w.nss {
		cm := &corev1.ConfigMap{}
		if w.env.Client().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: dfBundle}, cm) != nil {
			return false
		}
		if strings.Count(cm.Data[dfKey], "BEGIN CERTIFICATE") != len(cas) {
			return false
		}
		for _, ca := range cas {
			if !strings.Contains(cm.Data[dfKey], string(bytes.TrimSpace(ca.CertPEM))) {
				return false
			}
		}
	}
	return true
}

// rolled counts the restart-only Deployments rolled for step of rotation.
func (w *driveWorld) rolled(step, rotation string) int {
	n := 0
	for _, ns := range w.nss {
		dep := &appsv1.Deployment{}
		if w.env.Client().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "legacy"}, dep) == nil &&
			dep.Spec.Template.Annotations[census.AnnotationRotationRestart] == rotation+"/"+step {
			n++
		}
	}
	return n
}

// issuerOf is the issuer of the Certificate of namespace ns.
func (w *driveWorld) issuerOf(ns string) string {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	w.get(client.ObjectKey{Namespace: ns, Name: "cp"}, u)
	name, _, _ := unstructured.NestedString(u.Object, "spec", "issuerRef", "name")
	return name
}

// rotationSpec is the TrustRotation of r over the fleet: the Bundle's
// targets (and, driven, its source ConfigMap, which the controller writes),
// both control planes' Secrets, Prometheus's reports.
func (w *driveWorld) rotationSpec(r *dfRotation, driven bool) v1alpha1.TrustRotationSpec {
	spec := v1alpha1.TrustRotationSpec{Mode: v1alpha1.ModeObserve,
		OldCA:        v1alpha1.CA{Name: r.old.Cert.Subject.CommonName, From: &v1alpha1.KeyRef{Kind: "Secret", Namespace: w.trustNS, Name: caSecret(r.old), Key: "tls.crt"}},
		NewCA:        v1alpha1.CA{Name: r.new.Cert.Subject.CommonName, From: &v1alpha1.KeyRef{Kind: "Secret", Namespace: w.trustNS, Name: caSecret(r.new), Key: "tls.crt"}},
		Trust:        []v1alpha1.TrustObject{{Bundle: &v1alpha1.BundleRef{Name: dfBundle}}},
		Evidence:     v1alpha1.Evidence{Prometheus: &v1alpha1.PrometheusSource{URL: w.prom}},
		Propagation:  v1alpha1.Propagation{Volume: &metav1.Duration{Duration: dfVolumeDelay}},
		MinConsumers: dfConsumers,
	}
	for _, ns := range w.nss {
		spec.ServerCertificates = append(spec.ServerCertificates, v1alpha1.ServerCertificate{Namespace: ns, Name: "cp-tls", Port: "grpc", ServerName: dfServerName})
	}
	if driven {
		source := &v1alpha1.ObjectKey{Namespace: w.trustNS, Name: dfSource, Key: dfKey}
		spec.Mode = v1alpha1.ModeDrive
		spec.Trust = append([]v1alpha1.TrustObject{{ConfigMap: source}}, spec.Trust...)
		spec.Drive = &v1alpha1.DriveSpec{Bundle: v1alpha1.DriveBundle{ConfigMap: source},
			Reissue: v1alpha1.Reissue{CertManager: &v1alpha1.CertManagerReissue{IssuerRef: v1alpha1.IssuerRef{Name: caSecret(r.new), Kind: "ClusterIssuer", Group: "cert-manager.io"}}}}
	}
	return spec
}

func (w *driveWorld) createRotation(name string, spec v1alpha1.TrustRotationSpec) {
	w.create(&v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	w.tb.Cleanup(func() {
		_ = w.env.Client().Delete(context.Background(), &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
}

// userLog counts what a user types: writes (create, apply, patch, delete,
// cmctl renew), restarts (kubectl rollout restart), waits (kubectl wait,
// and waiting out the kubelet's delay) and reads (kubectl get).
type userLog struct {
	writes, restarts, waits, reads int
	commands                       []string // each when it ended, since begin
	begin                          time.Time
}

func (u *userLog) write(cmd string)   { u.writes++; u.log(cmd) }
func (u *userLog) restart(cmd string) { u.restarts++; u.log(cmd) }
func (u *userLog) wait(cmd string)    { u.waits++; u.log(cmd) }
func (u *userLog) read(cmd string)    { u.reads++; u.log(cmd) }

func (u *userLog) log(cmd string) {
	if u.begin.IsZero() {
		u.begin = time.Now()
	}
	u.commands = append(u.commands, fmt.Sprintf("%5.1fs %s", time.Since(u.begin).Seconds(), cmd))
}

// steps are the manual steps: writes, restarts and waits.
func (u *userLog) steps() int { return u.writes + u.restarts + u.waits }

// driveRotation rotates from r.old to r.new with one TrustRotation, as
// docs/ca-rotation.md says: the new CA's Secret and ClusterIssuer, the
// object, one wait. Before the first driven rotation the Bundle's source
// becomes a ConfigMap the controller may write (counted in setup). While
// the rotation runs, midStep (if set) is called for each step in turn. It
// returns the TrustRotation once complete, and the time from the first
// command to the end of the wait.
func (w *driveWorld) driveRotation(name string, r *dfRotation, setup, user *userLog, midStep func(step string)) (*v1alpha1.TrustRotation, time.Duration) {
	w.tb.Helper()
	ctx := context.Background()
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(bundleGVK)
	w.get(client.ObjectKey{Name: dfBundle}, b)
	if sources, _, _ := unstructured.NestedSlice(b.Object, "spec", "sources"); len(sources) != 1 || fmt.Sprint(sources[0]) != fmt.Sprint(map[string]any{"configMap": map[string]any{"name": dfSource, "key": dfKey}}) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.trustNS, Name: dfSource}, Data: map[string]string{dfKey: string(r.old.CertPEM)}}
		if err := w.env.Client().Create(ctx, cm); apierrors.IsAlreadyExists(err) {
			w.update(cm)
		} else if err != nil {
			w.tb.Fatal(err)
		}
		setup.write("kubectl -n cert-manager create configmap " + dfSource + " --from-file=ca.crt=" + caSecret(r.old) + ".crt")
		w.applyBundle(map[string]any{"configMap": map[string]any{"name": dfSource, "key": dfKey}})
		setup.write("kubectl apply -f bundle-from-configmap.yaml")
		w.waitFor("the Bundle's targets from its ConfigMap source", func() bool { return w.targetsHold(r.old) })
	}
	w.mu.Lock()
	w.sourceOld = true
	w.mu.Unlock()
	w.rot.Store(r)
	defer w.rot.Store(nil)
	stop := w.watchGates(name, r)
	defer stop()

	begin := time.Now()
	user.begin = begin
	w.createCASecret(r.new)
	user.write("kubectl -n cert-manager create secret tls " + caSecret(r.new) + " --cert=ca.crt --key=ca.key")
	w.create(w.clusterIssuer(caSecret(r.new), r.new))
	user.write("kubectl apply -f clusterissuer-" + caSecret(r.new) + ".yaml")
	w.createRotation(name, w.rotationSpec(r, true))
	user.write("kubectl apply -f trustrotation-" + name + ".yaml")
	if midStep != nil {
		for _, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
			midStep(step)
		}
	}
	tr := w.waitRotation(name, "the driven rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		p := drivePhase(tr)
		return p == v1alpha1.PhaseComplete || p == v1alpha1.PhaseStopped
	})
	took := time.Since(begin)
	user.wait("kubectl wait trustrotation/" + name + " --for=jsonpath='{.status.drive.phase}'=Complete --timeout=30m")
	if drivePhase(tr) != v1alpha1.PhaseComplete {
		w.tb.Fatalf("the rotation stopped: %s", tr.Status.Drive.Message)
	}
	stop()
	w.checkViolations()
	if err := w.env.Client().Delete(ctx, tr); err != nil {
		w.tb.Fatal(err)
	}
	user.write("kubectl delete trustrotation " + name)
	return tr, took
}

// runbookRotation rotates from r.old to r.new as
// docs/runbooks/rotate-cluster-ca.md says, command by command, each wait
// on what the runbook tells the user to wait for: the TrustRotation (mode
// Observe) declared, the Bundle given both CAs' Secrets, the restart-only
// consumers it names restarted, the issuer pointed at the new CA and the
// Certificates renewed, the Bundle given the new CA only, the restart-only
// consumers restarted again. It returns the time from the first command to
// the end of the last wait.
func (w *driveWorld) runbookRotation(name string, r *dfRotation, user *userLog) time.Duration {
	w.tb.Helper()
	ctx := context.Background()
	stop := w.watchGates(name, r)
	defer stop()
	begin := time.Now()
	user.begin = begin

	// Step 0: the new CA, the rotation.
	w.createCASecret(r.new)
	user.write("kubectl -n cert-manager create secret tls " + caSecret(r.new) + " --cert=ca.crt --key=ca.key")
	w.createRotation(name, w.rotationSpec(r, false))
	user.write("kubectl apply -f trustrotation-" + name + ".yaml")

	// Step 1: both CAs in the bundle.
	secret := func(ca *hotcerttest.CA) any {
		return map[string]any{"secret": map[string]any{"name": caSecret(ca), "key": "tls.crt"}}
	}
	w.applyBundle(secret(r.old), secret(r.new))
	user.write("kubectl apply -f bundle-both.yaml")
	w.restartStragglers(name, user, func(t v1alpha1.TrustObjectStatus) *metav1.Time { return t.NewSince }, "newSince")
	w.waitCondition(name, v1alpha1.StepAddNewCA, user)

	// Step 2: the issuer on the new CA, the Certificates renewed.
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(clusterIssuerGVK)
	w.get(client.ObjectKey{Name: w.issuerOf(w.nss[0])}, issuer)
	if err := unstructured.SetNestedField(issuer.Object, caSecret(r.new), "spec", "ca", "secretName"); err != nil {
		w.tb.Fatal(err)
	}
	w.update(issuer)
	user.write(`kubectl patch clusterissuer ` + issuer.GetName() + ` --type=merge -p '{"spec":{"ca":{"secretName":"` + caSecret(r.new) + `"}}}'`)
	w.waitFor("the ClusterIssuer Ready", func() bool {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(clusterIssuerGVK)
		w.get(client.ObjectKey{Name: issuer.GetName()}, u)
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" && m["observedGeneration"] == u.GetGeneration() {
				return true
			}
		}
		return false
	})
	user.wait("kubectl wait clusterissuer/" + issuer.GetName() + " --for=condition=Ready --timeout=2m")
	for _, ns := range w.nss {
		// What cmctl renew does: the Certificate's Issuing condition.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(certificateGVK)
		w.get(client.ObjectKey{Namespace: ns, Name: "cp"}, u)
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		conds = append(conds, map[string]any{"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
			"message": "Certificate re-issuance manually triggered", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
		if err := unstructured.SetNestedSlice(u.Object, conds, "status", "conditions"); err != nil {
			w.tb.Fatal(err)
		}
		if err := w.env.Client().Status().Update(ctx, u); err != nil {
			w.tb.Fatal(err)
		}
		user.write("cmctl renew -n " + ns + " cp")
	}
	w.waitCondition(name, v1alpha1.StepSwitchServerCert, user)

	// Step 3: the new CA alone in the bundle.
	w.applyBundle(secret(r.new))
	user.write("kubectl apply -f bundle-new.yaml")
	w.restartStragglers(name, user, func(t v1alpha1.TrustObjectStatus) *metav1.Time { return t.OldGoneSince }, "oldGoneSince")
	w.waitCondition(name, v1alpha1.StepRemoveOldCA, user)
	took := time.Since(begin)

	stop()
	w.checkViolations()
	if err := w.env.Client().Delete(ctx, &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		w.tb.Fatal(err)
	}
	user.write("kubectl delete trustrotation " + name)
	return took
}

// restartStragglers is what the runbook has the user do for the stragglers
// that will not move by themselves (evidence never or unknown): once the
// census has seen the change (field of the bundle's status) and the
// kubelet's delay has passed, restart their workloads.
func (w *driveWorld) restartStragglers(name string, user *userLog, since func(v1alpha1.TrustObjectStatus) *metav1.Time, field string) {
	w.tb.Helper()
	tr := w.waitRotation(name, "the census to see the change", func(tr *v1alpha1.TrustRotation) bool {
		return len(tr.Status.Trust) == 1 && since(tr.Status.Trust[0]) != nil
	})
	user.wait("kubectl wait trustrotation/" + name + " --for=jsonpath='{.status.trust[0]." + field + "}' --timeout=30m")
	time.Sleep(time.Until(since(tr.Status.Trust[0]).Add(dfVolumeDelay)))
	user.wait("sleep " + dfVolumeDelay.String() + " # the kubelet's delay (spec.propagation.volume)")
	w.get(client.ObjectKey{Name: name}, tr)
	user.read("kubectl get trustrotation " + name + " -o jsonpath='{range .status.stragglers[*]}…{end}'")
	workloads := map[string]bool{}
	for _, s := range tr.Status.Stragglers {
		if s.Evidence == v1alpha1.EvidenceNever || s.Evidence == v1alpha1.EvidenceUnknown {
			workloads[s.Namespace+"/"+strings.Split(s.Pod, "-")[0]] = true
		}
	}
	for _, key := range slices.Sorted(mapsKeys(workloads)) {
		ns, dep, _ := strings.Cut(key, "/")
		d := &appsv1.Deployment{}
		w.get(client.ObjectKey{Namespace: ns, Name: dep}, d)
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339Nano)
		w.update(d)
		user.restart("kubectl -n " + ns + " rollout restart deployment/" + dep)
	}
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// waitCondition is kubectl wait --for=condition=step.
func (w *driveWorld) waitCondition(name, step string, user *userLog) {
	w.tb.Helper()
	w.waitRotation(name, step, func(tr *v1alpha1.TrustRotation) bool {
		c := meta.FindStatusCondition(tr.Status.Conditions, step)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	user.wait("kubectl wait trustrotation/" + name + " --for=condition=" + step + " --timeout=30m")
}

// TestDrivenRotationOfAFleet: one TrustRotation in mode Drive rotates the
// cluster CA of a fleet of 52 real processes — `hotcert server`s (found
// through their EndpointSlices, proven by handshakes), `hotcert agent`s
// (scraped by a real Prometheus, proven by what they report) and
// restart-only python3 clients (opted-in Deployments the controller rolls
// through the real controller manager, proven by their start times) —
// over a bundle trust-manager distributes from the ConfigMap the
// controller writes, with cert-manager's Certificates switched to the new
// CA's ClusterIssuer. Every gate opens only when the ground truth says it
// may (each consumer's own word, each server's handshake); the
// controller, killed (SIGKILL) in the middle of each step and started
// again, takes each step once and rolls each restart-only Deployment once
// per bundle write; none of the clients' handshakes, made all along,
// fails.
func TestDrivenRotationOfAFleet(t *testing.T) {
	begin := time.Now()
	w := newDriveWorld(t)
	t.Logf("the fleet: %d consumer processes running after %s", dfConsumers, time.Since(begin).Round(100*time.Millisecond))
	ctl := w.startController()
	name := "drive-" + w.trustNS
	r := &dfRotation{old: w.ca(0), new: w.ca(1)}
	w.holdIssue.Store(true) // switch-server-cert cannot be done before the kill in its middle
	var setup, user userLog
	kills := 0
	atKill := map[string]v1alpha1.DriveStepStatus{} // each step's progress when the controller was killed in it
	tr, took := w.driveRotation(name, r, &setup, &user, func(step string) {
		tr := w.waitRotation(name, step+" written", func(tr *v1alpha1.TrustRotation) bool {
			if step == v1alpha1.StepAddNewCA { // mid-roll: once a restart-only Deployment is rolled
				return stepOf(tr, step).Written != nil && w.rolled(step, name) > 0
			}
			return stepOf(tr, step).Written != nil
		})
		if stepOf(tr, step).Done != nil {
			t.Fatalf("%s done before the kill: not a kill in the middle of it", step)
		}
		atKill[step] = stepOf(tr, step)
		ctl.kill()
		kills++
		ctl = w.startController()
		if step == v1alpha1.StepSwitchServerCert {
			w.holdIssue.Store(false) // cert-manager issues once the switch was written by the killed controller
		}
	})

	// The census of the fleet, as the test knows it: every consumer, each
	// with the evidence it can give.
	if c := tr.Status.Consumers; c.Total != dfConsumers || c.ByEvidence != (v1alpha1.EvidenceCounts{Reported: 40, Served: 4, Restarted: 8}) {
		t.Errorf("census %+v; ground truth: 40 agents reported, 4 servers served, 8 restart-only clients restarted", c)
	}
	// Each step started and written once across the kills: the progress
	// recorded before a kill is what the rotation ends with; none was taken
	// again (an Event per move, none repeated; the killed controller's last
	// Events may be lost with it).
	for step, before := range atKill {
		if after := stepOf(tr, step); !after.Started.Equal(before.Started) || !after.Written.Equal(before.Written) || after.Done == nil {
			t.Errorf("%s: progress %+v at the kill, %+v at the end", step, before, after)
		}
	}
	for _, c := range []struct{ reason, contains string }{{drive.EventStarted, "step add-new-ca started"}, {drive.EventStarted, "step switch-server-cert started"},
		{drive.EventStarted, "step remove-old-ca started"}, {drive.EventWrote, "add-new-ca:"}, {drive.EventWrote, "switch-server-cert: every Certificate"},
		{drive.EventWrote, "remove-old-ca:"}, {drive.EventStepDone, "step add-new-ca proven"}, {drive.EventStepDone, "step switch-server-cert proven"},
		{drive.EventStepDone, "step remove-old-ca proven"}, {drive.EventComplete, "rotation complete"}} {
		if n := w.countEvents(name, c.reason, c.contains); n > 1 {
			t.Errorf("%d %s Events %q, want at most 1", n, c.reason, c.contains)
		}
	}
	if n, m := w.countEvents(name, drive.EventComplete, ""), w.countEvents(name, drive.EventStopped, ""); n != 1 || m != 0 {
		t.Errorf("%d %s and %d %s Events, want 1 and 0", n, drive.EventComplete, m, drive.EventStopped)
	}
	// Each restart-only Deployment rolled once per bundle write, by the
	// real Deployment controller: revision 3.
	for _, ns := range w.nss {
		dep := &appsv1.Deployment{}
		w.get(client.ObjectKey{Namespace: ns, Name: "legacy"}, dep)
		if rev := dep.Annotations["deployment.kubernetes.io/revision"]; rev != "3" || dep.Spec.Template.Annotations[census.AnnotationRotationRestart] != name+"/"+v1alpha1.StepRemoveOldCA {
			t.Errorf("Deployment %s/legacy at revision %s, stamp %q: want 3 (one roll per bundle write)", ns, rev, dep.Spec.Template.Annotations[census.AnnotationRotationRestart])
		}
		if n := w.countEvents(name, census.EventRolled, "rolled Deployment "+ns+"/legacy"); n > 2 {
			t.Errorf("%d roll Events of %s/legacy, want at most 2", n, ns)
		}
		if got := w.issuerOf(ns); got != caSecret(r.new) {
			t.Errorf("Certificate %s/cp issued by %s", ns, got)
		}
	}
	if !w.targetsHold(r.new) {
		t.Error("the Bundle's targets do not hold exactly the new CA")
	}
	ok, failed, fewest, last := w.handshakes(context.Background())
	if failed != 0 || ok == 0 {
		t.Fatalf("%d of %d handshakes failed; the last: %s", failed, ok+failed, last)
	}
	if fewest < 3 {
		t.Errorf("an agent made %d handshakes: the clients must keep handshaking all along", fewest)
	}
	w.checkViolations()
	t.Logf("driven rotation of %d consumers in %s, the controller killed %d times (once in each step); %d handshakes (at least %d per agent), 0 failed; the user: %d writes, %d wait (setup: %d writes); the whole test %s",
		dfConsumers, took.Round(100*time.Millisecond), kills, ok, fewest, user.writes, user.waits, setup.writes, time.Since(begin).Round(100*time.Millisecond))
}

// BenchmarkCARotationRunbookVsObject measures, on the fleet of
// TestDrivenRotationOfAFleet, a cluster CA rotation done as the runbook
// (docs/runbooks/rotate-cluster-ca.md) says, command by command with its
// waits, and the next one done with one TrustRotation in mode Drive: the
// time from the first command to the rotation proven complete, and the
// manual steps (writes, restarts, waits). The user types at machine
// speed: the runbook's times are what its waits cost, not a person's.
func BenchmarkCARotationRunbookVsObject(b *testing.B) {
	w := newDriveWorld(b)
	w.startController()
	for i := 0; b.Loop(); i++ {
		var runbook, setup, object userLog
		tRunbook := w.runbookRotation(fmt.Sprintf("runbook-%d", i), &dfRotation{old: w.ca(2 * i), new: w.ca(2*i + 1)}, &runbook)
		tr, tObject := w.driveRotation(fmt.Sprintf("object-%d", i), &dfRotation{old: w.ca(2*i + 1), new: w.ca(2*i + 2)}, &setup, &object, nil)
		ok, failed, _, last := w.handshakes(context.Background())
		if failed != 0 {
			b.Fatalf("%d of %d handshakes failed; the last: %s", failed, ok+failed, last)
		}
		b.ReportMetric(tRunbook.Seconds(), "runbook-s")
		b.ReportMetric(tObject.Seconds(), "object-s")
		b.ReportMetric(float64(runbook.steps()), "runbook-steps")
		b.ReportMetric(float64(object.steps()), "object-steps")
		b.Logf("%d consumers, %d handshakes, 0 failed", dfConsumers, ok)
		b.Logf("runbook: %s; %d writes, %d restarts, %d waits, %d reads: %s", tRunbook.Round(100*time.Millisecond), runbook.writes, runbook.restarts, runbook.waits, runbook.reads, strings.Join(runbook.commands, " | "))
		var progress []string
		for _, s := range tr.Status.Drive.Steps {
			progress = append(progress, fmt.Sprintf("%s started %.1fs written %.1fs done %.1fs", s.Name, s.Started.Sub(object.begin).Seconds(),
				s.Written.Sub(object.begin).Seconds(), s.Done.Sub(object.begin).Seconds()))
		}
		b.Logf("object's steps (status.drive.steps, whole seconds): %s", strings.Join(progress, "; "))
		b.Logf("object: %s; %d writes, %d restarts, %d waits (one-time setup: %d writes): %s", tObject.Round(100*time.Millisecond), object.writes, object.restarts, object.waits, setup.writes, strings.Join(append(setup.commands, object.commands...), " | "))
	}
}
