package trustmanager

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// censusLabel marks the namespaces the census test's Bundle writes to.
const censusLabel = "hotcert.dev/census-test"

// TestCensusFollowsBundleTargets: a TrustRotation naming a trust-manager
// Bundle follows the ConfigMap trust-manager writes in every namespace the
// Bundle selects, and the pods that mount it there: step 1 waits on the pods
// that read their bundle before trust-manager wrote the new CA into their
// namespace, step 3 on the subPath consumer that never sees the old CA go,
// until each restarts.
func TestCensusFollowsBundleTargets(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	trustNS := env.NewNamespace(t)
	runTrustManager(t, trustNS)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	createCAConfigMap(t, trustNS, "ca-2025", ca2025.CertPEM)
	createCAConfigMap(t, trustNS, "ca-2026", ca2026.CertPEM)
	name := "census-" + trustNS
	var nss []string
	for range 2 {
		ns := env.NewNamespace(t)
		n, err := env.Clientset().CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels[censusLabel] = trustNS
		if _, err := env.Clientset().CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		nss = append(nss, ns)
	}
	b := censusBundle(name, trustNS, "ca-2025", "ca-2026")
	if err := env.Client().Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), b) })
	longAgo := time.Now().Add(-time.Hour)
	vol := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	runningPod(t, nss[0], "app", vol, "", longAgo)
	runningPod(t, nss[1], "legacy", vol, bundleKey, longAgo)

	create := &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TrustRotationSpec{
		OldCA:       v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA:       v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust:       []v1alpha1.TrustObject{{Bundle: &v1alpha1.BundleRef{Name: name}}},
		Propagation: v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}},
	}}
	if err := env.Client().Create(context.Background(), create); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), create) })
	startCensus(t)

	tr := waitRotation(t, name, "both targets holding the new CA", func(tr *v1alpha1.TrustRotation) bool {
		return len(tr.Status.Trust) == 1 && tr.Status.Trust[0].Objects == 2 && tr.Status.Trust[0].HoldNew == 2 && tr.Status.Consumers.Total == 2
	})
	if c := stepCondition(tr, v1alpha1.StepAddNewCA); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonUnproven || len(tr.Status.Stragglers) != 2 {
		t.Fatalf("add-new-ca %+v, stragglers %+v", c, tr.Status.Stragglers)
	}
	restart := afterDelay(tr.Status.Trust[0].NewSince.Time)
	setRunning(t, nss[0], "app", restart)
	setRunning(t, nss[1], "legacy", restart)
	waitRotation(t, name, "add-new-ca done", func(tr *v1alpha1.TrustRotation) bool {
		return stepCondition(tr, v1alpha1.StepAddNewCA).Status == metav1.ConditionTrue
	})

	// Step 3: the Bundle drops CA-2025; trust-manager rewrites both targets.
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(b.GroupVersionKind())
	if err := env.Client().Get(context.Background(), client.ObjectKey{Name: name}, cur); err != nil {
		t.Fatal(err)
	}
	upd := censusBundle(name, trustNS, "ca-2026")
	upd.SetResourceVersion(cur.GetResourceVersion())
	if err := env.Client().Update(context.Background(), upd); err != nil {
		t.Fatal(err)
	}
	tr = waitRotation(t, name, "the old CA gone from both targets", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Trust[0].OldGoneSince != nil
	})
	c := stepCondition(tr, v1alpha1.StepRemoveOldCA)
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonUnproven {
		t.Fatalf("remove-old-ca %+v", c)
	}
	var sub *v1alpha1.Straggler
	for i, s := range tr.Status.Stragglers {
		if s.Pod == "legacy" {
			sub = &tr.Status.Stragglers[i]
		}
	}
	if sub == nil || sub.How != "subPath" || sub.Evidence != v1alpha1.EvidenceNever || sub.Object != "ConfigMap "+nss[1]+"/"+name+" key "+bundleKey {
		t.Fatalf("stragglers %+v: want the subPath consumer, never updated", tr.Status.Stragglers)
	}
	restart = afterDelay(tr.Status.Trust[0].OldGoneSince.Time)
	setRunning(t, nss[0], "app", restart)
	setRunning(t, nss[1], "legacy", restart)
	waitRotation(t, name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		return stepCondition(tr, v1alpha1.StepRemoveOldCA).Status == metav1.ConditionTrue && tr.Status.Next == ""
	})
}

// censusBundle is a Bundle of the ConfigMaps sources (key ca.crt) in the
// trust namespace, written to the namespaces labelled for this test.
func censusBundle(name, trustNS string, sources ...string) *unstructured.Unstructured {
	var srcs []any
	for _, s := range sources {
		srcs = append(srcs, map[string]any{"configMap": map[string]any{"name": s, "key": bundleKey}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trust.cert-manager.io/v1alpha1",
		"kind":       "Bundle",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"sources": srcs,
			"target": map[string]any{
				"configMap":         map[string]any{"key": bundleKey},
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{censusLabel: trustNS}},
			},
		},
	}}
}

// runningPod creates a pod mounting vol (with subPath when set) and writes
// its status as a kubelet would: running, its container started at started.
func runningPod(t *testing.T, ns, name string, vol corev1.VolumeSource, subPath string, started time.Time) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
			VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca/" + subPath, SubPath: subPath}}}},
		Volumes: []corev1.Volume{{Name: "ca", VolumeSource: vol}},
	}}
	if err := env.Client().Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	setRunning(t, ns, name, started)
}

func setRunning(t *testing.T, ns, name string, started time.Time) {
	t.Helper()
	p := &corev1.Pod{}
	if err := env.Client().Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:1",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}}}}}
	if err := env.Client().Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// afterDelay waits until the rotation's propagation delay (1s) has passed
// since a change the census saw at since, and returns the time.
func afterDelay(since time.Time) time.Time {
	if d := time.Until(since.Add(time.Second)); d > 0 {
		time.Sleep(d)
	}
	return time.Now()
}

// startCensus runs a census controller until the test ends.
func startCensus(t *testing.T) {
	t.Helper()
	c, err := census.New(census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond, Registerer: prometheus.NewRegistry(), SkipNameValidation: true})
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
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("census: %v", err)
		}
	})
}

func waitRotation(t *testing.T, name, what string, cond func(*v1alpha1.TrustRotation) bool) *v1alpha1.TrustRotation {
	t.Helper()
	deadline := time.Now().Add(pollTimeout)
	for {
		tr := &v1alpha1.TrustRotation{}
		if err := env.Client().Get(context.Background(), client.ObjectKey{Name: name}, tr); err != nil {
			t.Fatal(err)
		}
		if len(tr.Status.Conditions) == 3 && cond(tr) {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, tr.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stepCondition(tr *v1alpha1.TrustRotation, step string) *metav1.Condition {
	if c := meta.FindStatusCondition(tr.Status.Conditions, step); c != nil {
		return c
	}
	return &metav1.Condition{}
}
