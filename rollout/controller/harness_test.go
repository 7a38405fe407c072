package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
)

// env is the control plane shared by this package's tests: a real etcd,
// kube-apiserver and kube-controller-manager (Deployments get ReplicaSets,
// StatefulSets and DaemonSets get ControllerRevisions). Each test works in a
// namespace of its own, with a controller of its own scoped to it.
var env *kubetest.Env

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runMemoryHelper())
	}
	ctrl.SetLogger(logr.Discard())
	// kagent-shaped CRDs and the ReferenceRule CRD, for the chain tests.
	kubetest.Main(m, &env, kubetest.WithControllerManager(), kubetest.WithCRDPaths("../internal/referencerules/testdata/crds.yaml", "../api/v1alpha1/crd"))
}

// pollTimeout bounds every wait for the cluster to converge.
const pollTimeout = 60 * time.Second

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// running is a controller process under test.
type running struct {
	t      testing.TB
	ns     string
	ctl    *Controller
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	stop   sync.Once
	logs   *syncBuffer
	mgr    manager.Manager

	seenMu sync.Mutex
	seen   map[clusterview.Key]map[string]bool // versions of objects reconciles resolved
}

type ctrlOptions = ctrl.Options

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

var testCA = hotcerttest.MustNewCA()

// hotcertCA returns a fresh CA.
func hotcertCA() *hotcerttest.CA { return hotcerttest.MustNewCA() }

// issue returns a fresh leaf certificate and key.
func issue() *hotcerttest.Leaf { return testCA.MustIssue() }

func testutilGauge(g prometheus.Gauge) float64     { return testutil.ToFloat64(g) }
func testutilCounter(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testOptions are fast defaults for tests: no minimum interval, no budget.
func testOptions() Options {
	return Options{MinInterval: -1, MaxRollouts: -1}
}

// startController runs a controller scoped to ns until the test ends (or Stop).
func startController(t testing.TB, ns string, o Options, mods ...func(*ctrl.Options)) *running {
	t.Helper()
	return startControllerWith(t, env.Config(), ns, o, mods...)
}

func startControllerWith(t testing.TB, rc *rest.Config, ns string, o Options, mods ...func(*ctrl.Options)) *running {
	t.Helper()
	return startControllerIn(t, rc, nsList(ns), o, mods...)
}

// startControllerIn runs a controller scoped to namespaces (the first is the
// running's ns).
func startControllerIn(t testing.TB, rc *rest.Config, namespaces []string, o Options, mods ...func(*ctrl.Options)) *running {
	t.Helper()
	ns := ""
	if len(namespaces) > 0 {
		ns = namespaces[0]
	}
	r := &running{t: t, ns: ns, reg: prometheus.NewRegistry(), done: make(chan error, 1), logs: &syncBuffer{}}
	o.Registerer = r.reg
	o.SkipNameValidation = true
	o.Namespaces = namespaces
	ctl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	r.ctl = ctl
	logger := logr.FromSlogHandler(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.Level(-1)}))
	mo := ctrl.Options{
		Logger:                 logger,
		Cache:                  ctl.CacheOptions(),
		NewCache:               ctl.NewCache,
		Client:                 ctl.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, m := range mods {
		m(&mo)
	}
	mgr, err := ctrl.NewManager(rc, mo)
	if err != nil {
		t.Fatal(err)
	}
	r.mgr = mgr
	if err := ctl.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	r.seen = map[clusterview.Key]map[string]bool{}
	ctl.shared.onLookup = func(_ string, k clusterview.Key, o *rollout.Object) {
		rv := ""
		if o != nil {
			rv = o.ResourceVersion
		}
		r.seenMu.Lock()
		defer r.seenMu.Unlock()
		if r.seen[k] == nil {
			r.seen[k] = map[string]bool{}
		}
		r.seen[k][rv] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("controller log:\n%s", r.logs)
		}
	})
	return r
}

func nsList(ns string) []string {
	if ns == "" {
		return nil
	}
	return []string{ns}
}

// Stop stops the controller and waits until it has.
func (r *running) Stop() {
	r.stop.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				r.t.Errorf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			r.t.Error("controller did not stop")
		}
	})
}

// counter returns the value of <prefix>_rollouts_total{kind,result,reason}.
func (r *running) counter(kind string, res result, why reason) int {
	return int(testutil.ToFloat64(r.ctl.report.metrics.rollouts.WithLabelValues(kind, string(res), string(why))))
}

// digested reports whether a reconcile has resolved the version rv of an
// object, i.e. decided about a workload with it ("" for its absence).
func (r *running) digested(kind rollout.Kind, name, rv string) bool {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	return r.seen[clusterview.Key{Kind: kind, Namespace: r.ns, Name: name}][rv]
}

// waitFor polls cond every 50 ms until it holds or pollTimeout passes.
func waitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	waitForWithin(t, pollTimeout, what, cond)
}

func waitForWithin(t testing.TB, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s (last error: %v)", d, what, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holds checks that cond stays true for d.
func holds(t testing.TB, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !ok {
			t.Fatalf("%s stopped holding", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clientset() kubernetes.Interface { return env.Clientset() }

// --- objects ---

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func createSecret(t testing.TB, s *corev1.Secret) *corev1.Secret {
	t.Helper()
	out, err := clientset().CoreV1().Secrets(s.Namespace).Create(testContext(t), s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// updateSecret applies mut to the current Secret and writes it; it returns the
// new version.
func updateSecret(t testing.TB, ns, name string, mut func(*corev1.Secret)) *corev1.Secret {
	t.Helper()
	ctx := testContext(t)
	for {
		s, err := clientset().CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mut(s)
		out, err := clientset().CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

func setKey(key, value string) func(*corev1.Secret) {
	return func(s *corev1.Secret) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[key] = []byte(value)
	}
}

// envFrom is a pod spec whose container reads the given Secret keys as env vars.
func envFrom(secretName string, keys ...string) corev1.PodSpec {
	c := corev1.Container{Name: "app", Image: "registry.invalid/app:1"}
	for _, k := range keys {
		c.Env = append(c.Env, corev1.EnvVar{Name: "V_" + strings.NewReplacer(".", "_", "-", "_").Replace(k), ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: k}}})
	}
	return corev1.PodSpec{Containers: []corev1.Container{c}}
}

// mountAll is a pod spec mounting a whole Secret.
func mountAll(secretName string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
			VolumeMounts: []corev1.VolumeMount{{Name: "s", MountPath: "/etc/s"}}}},
		Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secretName}}}},
	}
}

func deployment(ns, name string, replicas int32, spec corev1.PodSpec, annotations map[string]string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

var optIn = map[string]string{rollout.AnnotationRolloutOnChange: "true"}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := env.Client().Create(testContext(t), obj); err != nil {
		t.Fatal(err)
	}
}

func getDeployment(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := clientset().AppsV1().Deployments(ns).Get(testContext(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// replicaSets counts the ReplicaSets of a Deployment: one per rollout, made by
// the real kube-controller-manager.
func replicaSets(t testing.TB, ns, name string) int {
	t.Helper()
	d := getDeployment(t, ns, name)
	list, err := clientset().AppsV1().ReplicaSets(ns).List(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rs := range list.Items {
		if slices.ContainsFunc(rs.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == d.UID }) {
			n++
		}
	}
	return n
}

// controllerRevisions counts the ControllerRevisions owned by uid.
func controllerRevisions(t testing.TB, ns string, owner client.Object) int {
	t.Helper()
	list, err := clientset().AppsV1().ControllerRevisions(ns).List(testContext(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cr := range list.Items {
		if slices.ContainsFunc(cr.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.GetUID() }) {
			n++
		}
	}
	return n
}

func waitReplicaSets(t testing.TB, ns, name string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d ReplicaSets of %s", n, name), func() (bool, error) { return replicaSets(t, ns, name) == n, nil })
}

// waitAdopted waits until the controller recorded a baseline for the
// Deployment.
func waitAdopted(t testing.TB, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	waitFor(t, "adoption of "+name, func() (bool, error) {
		d = getDeployment(t, ns, name)
		return d.Annotations[rollout.AnnotationAppliedHash] != "", nil
	})
	return d
}

// events returns the Events on the object named name, with reason, oldest first.
func events(t testing.TB, ns, name string, reason eventReason) []corev1.Event {
	t.Helper()
	list, err := clientset().CoreV1().Events(ns).List(testContext(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if reason == "" || e.Reason == string(reason) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Event) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

func waitEvent(t testing.TB, ns, name string, reason eventReason, contains string) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitFor(t, fmt.Sprintf("a %s Event on %s saying %q", reason, name, contains), func() (bool, error) {
		for _, e := range events(t, ns, name, reason) {
			if strings.Contains(e.Message, contains) {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	return found
}
