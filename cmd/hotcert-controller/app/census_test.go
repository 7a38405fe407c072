package app

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// TestRunWithCensus: --census runs the census beside the rollout controller
// in one manager: a TrustRotation's status counts the pod that mounts its
// ConfigMap, and the census metrics are served.
func TestRunWithCensus(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	ctx := context.Background()
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	if _, err := env.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca"},
		Data: map[string]string{"ca.crt": string(hotcerttest.BundlePEM(ca2025, ca2026))}}, metav1.CreateOptions{}); err != nil {
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
	name := "app-" + ns
	tr := &v1alpha1.TrustRotation{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "TrustRotation"},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TrustRotationSpec{
			OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)}, NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
			Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
		}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tr)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	if err := env.Client().Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), u) })

	metricsPort := testutil.FreePort(t, "127.0.0.1")
	_, prefix := start(t, "--kubeconfig", writeKubeconfig(t, ""), "--namespace", ns, "--leader-elect=false",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--health-probe-bind-address=0",
		"--census", "--census-interval=300ms")
	waitFor(t, "the census in the status", func() bool {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("TrustRotation"))
		if err := env.Client().Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false
		}
		total, _, _ := unstructured.NestedInt64(got.Object, "status", "consumers", "total")
		unknown, _, _ := unstructured.NestedInt64(got.Object, "status", "consumers", "byEvidence", "unknown")
		return total == 1 && unknown == 1
	})
	waitFor(t, "the census metrics", func() bool {
		_, body := get(fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort))
		return strings.Contains(body, prefix+`_census_consumers{evidence="unknown",rotation="`+name+`"} 1`) &&
			strings.Contains(body, prefix+`_census_step_done{rotation="`+name+`",step="add-new-ca"} 0`)
	})
}
