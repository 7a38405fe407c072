package app

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestRunWithCensusPrometheusBehindAuth: with --census-prometheus-url and an
// http_config file, the census reads what a hotcert process reports from a
// real Prometheus that serves its API over TLS with basic auth only (its own
// web.config): the pod that mounts the rotation's ConfigMap, started before
// the change, is proven (reported) to trust the new CA.
func TestRunWithCensusPrometheusBehindAuth(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	ctx := context.Background()
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	bundle := hotcerttest.BundlePEM(ca2025, ca2026)

	// The pod's process: a hotcert reloader's metrics, holding the union.
	reg := prometheus.NewRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	leaf := ca2026.MustIssue()
	m, err := hotcert.Validate(hotcert.Content{Cert: hotcert.Input{Name: "tls.crt", Data: leaf.ChainPEM}, Key: hotcert.Input{Name: "tls.key", Data: leaf.KeyPEM},
		CA: hotcert.Input{Name: "ca.crt", Data: bundle}})
	if err != nil {
		t.Fatal(err)
	}
	rec.ObserveLoad("app", m, false)
	target := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(target.Close)
	monitoringCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("monitoring CA"))
	promURL, caFile := testutil.StartSecuredPrometheus(t, monitoringCA,
		testutil.PrometheusTarget{Addr: target.Listener.Addr().String(), Labels: map[string]string{"namespace": ns, "pod": "app"}})
	dir := t.TempDir()
	pw, httpConfig := filepath.Join(dir, "password"), filepath.Join(dir, "http.yml")
	if err := os.WriteFile(pw, []byte(testutil.PrometheusPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(httpConfig, fmt.Appendf(nil, "basic_auth: {username: %s, password_file: %q}\ntls_config: {ca_file: %q}\n", testutil.PrometheusUser, pw, caFile), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := env.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data: map[string]string{"ca.crt": string(bundle)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := env.Clientset().CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca"}}}},
		Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:1",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Now().Add(-time.Hour))}}}}}
	if _, err := env.Clientset().CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "prom-" + ns
	tr := &v1alpha1.TrustRotation{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TrustRotation"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TrustRotationSpec{
			OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)}, NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
			Trust:    []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
			Evidence: v1alpha1.Evidence{Prometheus: &v1alpha1.PrometheusSource{URL: promURL}},
		}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tr)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if err := env.Client().Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), u) })

	start(t, "--kubeconfig", writeKubeconfig(t, ""), "--namespace", ns, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--census", "--census-interval=300ms",
		"--census-prometheus-url="+promURL, "--census-prometheus-http-config-file="+httpConfig)
	waitFor(t, "the pod reported in the status", func() bool {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("TrustRotation"))
		if err := env.Client().Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false
		}
		reported, _, _ := unstructured.NestedInt64(got.Object, "status", "consumers", "byEvidence", "reported")
		return reported == 1
	})
}
