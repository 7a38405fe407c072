package trustmanager

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// drivenBundle is a world for a rotation driven over a trust-manager
// Bundle: the real trust-manager (its webhook validating every Bundle
// write), the Bundle's source ConfigMap ca-2025 in the trust namespace, two
// target namespaces, a consumer pod in each that reads the target at start
// and that the test restarts once the kubelet's delay has passed after the
// census saw the targets change (playing the Deployment controller).
type drivenBundle struct {
	t                *testing.T
	trustNS, name    string
	targets          []string
	ca2025, ca2026   *hotcerttest.CA
	stopRestarts     func()
	restartsPerStage map[string]int
}

func newDrivenBundle(t *testing.T) *drivenBundle {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	w := &drivenBundle{t: t, trustNS: env.NewNamespace(t),
		ca2025: hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025")),
		ca2026: hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))}
	w.name = "drive-" + w.trustNS
	runTrustManager(t, w.trustNS)
	createCAConfigMap(t, w.trustNS, "ca-2025", w.ca2025.CertPEM)
	for range 2 {
		ns := env.NewNamespace(t)
		n, err := env.Clientset().CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[censusLabel] = w.trustNS
		if _, err := env.Clientset().CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		w.targets = append(w.targets, ns)
	}
	b := censusBundle(w.name, w.trustNS, "ca-2025")
	if err := env.Client().Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), b) })
	vol := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.name}}}
	for _, ns := range w.targets {
		runningPod(t, ns, "app", vol, "", time.Now().Add(-time.Hour))
	}
	return w
}

// rotation creates the TrustRotation driving the Bundle.
func (w *drivenBundle) rotation(dryRun bool) {
	tr := &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: w.name}, Spec: v1alpha1.TrustRotationSpec{
		Mode:        v1alpha1.ModeDrive,
		OldCA:       v1alpha1.CA{PEM: string(w.ca2025.CertPEM)},
		NewCA:       v1alpha1.CA{PEM: string(w.ca2026.CertPEM)},
		Trust:       []v1alpha1.TrustObject{{Bundle: &v1alpha1.BundleRef{Name: w.name}}},
		Propagation: v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}},
		Drive: &v1alpha1.DriveSpec{
			Bundle:  v1alpha1.DriveBundle{Bundle: &v1alpha1.DriveTrustManagerBundle{Name: w.name, TrustNamespace: w.trustNS}},
			Reissue: v1alpha1.Reissue{External: &v1alpha1.ExternalReissue{}},
			DryRun:  dryRun,
		},
	}}
	if err := env.Client().Create(context.Background(), tr); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = env.Client().Delete(context.Background(), tr) })
}

// restarts plays the Deployment controller and the kubelet: once the
// propagation delay has passed after the census saw the targets hold the
// new CA (and again after it saw the old one gone), each consumer restarts,
// reading the target at start.
func (w *drivenBundle) restarts() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	w.stopRestarts = func() { cancel(); wg.Wait() }
	w.t.Cleanup(w.stopRestarts)
	w.restartsPerStage = map[string]int{}
	wg.Go(func() {
		done := map[string]bool{}
		for ctx.Err() == nil {
			tr := &v1alpha1.TrustRotation{}
			if env.Client().Get(ctx, client.ObjectKey{Name: w.name}, tr) == nil && len(tr.Status.Trust) == 1 {
				for stage, since := range map[string]*metav1.Time{"new": tr.Status.Trust[0].NewSince, "old-gone": tr.Status.Trust[0].OldGoneSince} {
					if since == nil || done[stage] || time.Now().Before(since.Add(time.Second)) {
						continue
					}
					done[stage] = true
					for _, ns := range w.targets {
						setRunning(w.t, ns, "app", time.Now())
					}
					w.restartsPerStage[stage]++
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

func (w *drivenBundle) bundle() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(censusBundle(w.name, w.trustNS).GroupVersionKind())
	if err := env.Client().Get(context.Background(), client.ObjectKey{Name: w.name}, u); err != nil {
		w.t.Fatal(err)
	}
	return u
}

func (w *drivenBundle) sources() []any {
	s, _, _ := unstructured.NestedSlice(w.bundle().Object, "spec", "sources")
	return s
}

// targetsHold reports whether every target ConfigMap holds exactly cas.
func (w *drivenBundle) targetsHold(cas ...*hotcerttest.CA) bool {
	for _, ns := range w.targets {
		cm := &corev1.ConfigMap{}
		if env.Client().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: w.name}, cm) != nil {
			return false
		}
		var got []*x509.Certificate
		rest := []byte(cm.Data[bundleKey])
		for {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return false
			}
			got = append(got, c)
		}
		if len(got) != len(cas) {
			return false
		}
		for _, ca := range cas {
			found := false
			for _, c := range got {
				found = found || bytes.Equal(c.Raw, ca.Cert.Raw)
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// TestDrivenRotationOfATrustManagerBundle: a rotation driven over a
// trust-manager Bundle, with the real trust-manager writing its targets: a
// dry run plans the Bundle's writes and writes nothing; then the
// controller adds an inLine source holding the new CA (trust-manager
// writes the union into every target namespace), waits until the census
// proves every consumer, through the targets, trusts it, and at
// remove-old-ca drops the ConfigMap source that holds only the old CA;
// each write once; the Bundle ends with the new CA's inLine source alone.
func TestDrivenRotationOfATrustManagerBundle(t *testing.T) {
	w := newDrivenBundle(t)
	w.rotation(true)
	gen := w.bundle().GetGeneration() // its spec's (trust-manager writes its status)
	startDrivingCensus(t)
	tr := waitRotation(t, w.name, "the plan", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Drive != nil && tr.Status.Drive.Phase == v1alpha1.PhaseDryRun && tr.Status.Consumers.Total == 2
	})
	plan := strings.Join(tr.Status.Drive.Plan, "\n")
	for _, want := range []string{"add-new-ca: write Bundle " + w.name + ": add CA-2026 beside CA-2025", "remove-old-ca: write Bundle " + w.name + ": remove CA-2025"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan lacks %q:\n%s", want, plan)
		}
	}
	time.Sleep(time.Second) // three censuses
	if now := w.bundle().GetGeneration(); now != gen {
		t.Fatalf("a dry run wrote the Bundle (generation %d, then %d)", gen, now)
	}

	w.restarts()
	editRotation(t, w.name, func(s *v1alpha1.TrustRotationSpec) { s.Drive.DryRun = false })
	waitRotation(t, w.name, "the union in every target", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil && w.targetsHold(w.ca2025, w.ca2026)
	})
	if s := w.sources(); len(s) != 2 || s[1].(map[string]any)["inLine"] != string(w.ca2026.CertPEM) {
		t.Fatalf("the Bundle's sources after add-new-ca: %v", s)
	}
	tr = waitRotation(t, w.name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Drive.Phase == v1alpha1.PhaseComplete || tr.Status.Drive.Phase == v1alpha1.PhaseStopped
	})
	if tr.Status.Drive.Phase != v1alpha1.PhaseComplete {
		t.Fatalf("stopped: %s", tr.Status.Drive.Message)
	}
	w.stopRestarts()
	if s := w.sources(); len(s) != 1 || s[0].(map[string]any)["inLine"] != string(w.ca2026.CertPEM) {
		t.Fatalf("the Bundle's sources at the end: %v", s)
	}
	if !w.targetsHold(w.ca2026) {
		t.Fatal("a target still holds CA-2025")
	}
	for _, c := range []string{"add-new-ca: Bundle " + w.name, "remove-old-ca: Bundle " + w.name} {
		if n := countDriveEvents(t, w.name, "DriveWrote", c); n != 1 {
			t.Errorf("%q written %d times", c, n)
		}
	}
	if w.restartsPerStage["new"] != 1 || w.restartsPerStage["old-gone"] != 1 {
		t.Fatalf("restarts %v", w.restartsPerStage)
	}
}

// TestDrivenRotationOfATrustManagerBundleRollsBack: rolled back after
// add-new-ca, the Bundle loses the inLine source the controller added and
// trust-manager writes the old CA alone into every target again.
func TestDrivenRotationOfATrustManagerBundleRollsBack(t *testing.T) {
	w := newDrivenBundle(t)
	w.rotation(false)
	startDrivingCensus(t)
	waitRotation(t, w.name, "the union in every target", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil && w.targetsHold(w.ca2025, w.ca2026)
	})
	editRotation(t, w.name, func(s *v1alpha1.TrustRotationSpec) { s.Drive.Action = v1alpha1.ActionRollback })
	waitRotation(t, w.name, "rolled back", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Drive.Phase == v1alpha1.PhaseRolledBack && w.targetsHold(w.ca2025)
	})
	if s := w.sources(); len(s) != 1 || s[0].(map[string]any)["configMap"] == nil {
		t.Fatalf("the Bundle's sources after the rollback: %v", s)
	}
}

// TestDrivenTrustManagerBundleWriteIsIdempotent: the controller stops
// after adding the new CA's source and before recording it (as a crash
// would leave it: the step's written time is taken out of the status); a
// new controller makes the write again, and it changes nothing: the Bundle
// is not rewritten, and holds one inLine source of the new CA.
func TestDrivenTrustManagerBundleWriteIsIdempotent(t *testing.T) {
	w := newDrivenBundle(t)
	w.rotation(false)
	stop := startDrivingCensus(t)
	waitRotation(t, w.name, "the union in every target", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil && w.targetsHold(w.ca2025, w.ca2026)
	})
	stop()
	gen := w.bundle().GetGeneration() // its spec's (trust-manager writes its status)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tr := &v1alpha1.TrustRotation{}
		if err := env.Client().Get(context.Background(), client.ObjectKey{Name: w.name}, tr); err != nil {
			return err
		}
		for i := range tr.Status.Drive.Steps {
			if tr.Status.Drive.Steps[i].Name == v1alpha1.StepAddNewCA {
				tr.Status.Drive.Steps[i].Written = nil
			}
		}
		return env.Client().Status().Update(context.Background(), tr)
	}); err != nil {
		t.Fatal(err)
	}
	startDrivingCensus(t)
	waitRotation(t, w.name, "the write made again", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil
	})
	if now := w.bundle().GetGeneration(); now != gen {
		t.Fatalf("the repeated write rewrote the Bundle (generation %d, then %d): %v", gen, now, w.sources())
	}
	if s := w.sources(); len(s) != 2 || s[1].(map[string]any)["inLine"] != string(w.ca2026.CertPEM) {
		t.Fatalf("the Bundle's sources: %v", s)
	}
}

// startDrivingCensus runs a census controller that drives rotations until
// stop is called or the test ends.
func startDrivingCensus(t *testing.T) (stop func()) {
	t.Helper()
	c, err := census.New(census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond, Registerer: prometheus.NewRegistry(),
		SkipNameValidation: true, Drive: true})
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
				t.Errorf("census: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
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

// countDriveEvents counts the Events of reason on the TrustRotation whose
// message contains contains.
// countDriveEvents counts the rotation's Events of reason whose message holds
// contains, waiting up to 10 s for the first (the recorder writes them
// asynchronously, after the status).
func countDriveEvents(t *testing.T, name, reason, contains string) int {
	t.Helper()
	count := func() int {
		list := &corev1.EventList{}
		if err := env.Client().List(context.Background(), list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
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
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n := count(); n > 0 || time.Now().After(deadline) {
			return n
		}
	}
}

// editRotation changes the rotation's spec as edit says, read afresh and
// retried while the controller writes its status in between.
func editRotation(t *testing.T, name string, edit func(*v1alpha1.TrustRotationSpec)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tr := &v1alpha1.TrustRotation{}
		if err := env.Client().Get(context.Background(), client.ObjectKey{Name: name}, tr); err != nil {
			return err
		}
		edit(&tr.Spec)
		return env.Client().Update(context.Background(), tr)
	}); err != nil {
		t.Fatal(err)
	}
}
