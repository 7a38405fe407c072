package deploy

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// driveNeeds is what a driven rotation does with the API server beyond the
// census: write the bundle objects and the Certificates, roll workloads.
var driveNeeds = [][3]string{
	{"", "configmaps", "update"},
	{"trust.cert-manager.io", "bundles", "get"}, {"trust.cert-manager.io", "bundles", "update"},
	{"certificates.k8s.io", "clustertrustbundles", "get"}, {"certificates.k8s.io", "clustertrustbundles", "create"}, {"certificates.k8s.io", "clustertrustbundles", "update"},
	{"cert-manager.io", "certificates", "get"}, {"cert-manager.io", "certificates", "list"}, {"cert-manager.io", "certificates", "update"},
	{"", "pods", "get"}, {"apps", "replicasets", "get"},
	{"apps", "deployments", "get"}, {"apps", "deployments", "update"}, {"apps", "statefulsets", "get"}, {"apps", "statefulsets", "update"},
	{"apps", "daemonsets", "get"}, {"apps", "daemonsets", "update"},
}

// driveMustNot is what it must still not be allowed: it creates or deletes
// none of what it edits, changes no Secret (unless granted by name), no
// TrustRotation's spec, no pod, and attests for no signer unless granted.
var driveMustNot = [][3]string{
	{"", "configmaps", "create"}, {"", "configmaps", "delete"}, {"", "configmaps", "patch"},
	{"", "secrets", "update"}, {"", "secrets", "patch"}, {"", "secrets", "create"}, {"", "secrets", "delete"},
	{"trust.cert-manager.io", "bundles", "create"}, {"trust.cert-manager.io", "bundles", "delete"},
	{"certificates.k8s.io", "clustertrustbundles", "delete"}, {"certificates.k8s.io", "signers", "attest"},
	{"cert-manager.io", "certificates", "create"}, {"cert-manager.io", "certificates", "delete"}, {"cert-manager.io", "certificates", "patch"},
	{"cert-manager.io", "issuers", "update"}, {"cert-manager.io", "clusterissuers", "update"},
	{"hotcert.dev", "trustrotations", "update"}, {"hotcert.dev", "trustrotations", "create"},
	{"", "pods", "update"}, {"", "pods", "delete"}, {"", "pods/exec", "create"}, {"", "pods/log", "get"},
	{"apps", "replicasets", "update"}, {"apps", "deployments", "delete"}, {"apps", "deployments", "create"},
}

// checkCensusDrive, with the base applied, applies the census-drive
// overlay's RBAC (the census's and the drive's) and checks with
// SubjectAccessReviews that the controller's ServiceAccount may do what a
// driven rotation needs and nothing of driveMustNot; then it runs the
// binary with the overlay's arguments, as that ServiceAccount, against a
// TrustRotation in mode Drive: it writes the union into the bundle
// ConfigMap, and nothing is forbidden.
func checkCensusDrive(t *testing.T, sa *corev1.ServiceAccount, as rest.ImpersonationConfig) {
	ctx := testContext(t)
	objs := kustomize(t, "overlays/census-drive")
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", "hotcert-controller"))
	if o := containerArgs(t, dep); !o.Census || !o.CensusDrive {
		t.Fatalf("the overlay sets --census %v, --census-drive %v", o.Census, o.CensusDrive)
	}
	role := convert[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "hotcert-controller-census-drive"))
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "secrets" || strings.Contains(res, "*") || strings.Contains(strings.Join(r.Verbs, ","), "*") {
				t.Errorf("the drive's ClusterRole grants %v on %s", r.Verbs, res)
			}
		}
	}
	if allowed(t, as, "", "configmaps", "update") || allowed(t, as, "cert-manager.io", "certificates", "update") {
		t.Fatal("without the drive component, the controller may update ConfigMaps or Certificates")
	}
	for _, name := range []string{"hotcert-controller-census", "hotcert-controller-census-drive"} {
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
			o := find(objs, kind, name)
			if err := env.Client().Create(ctx, o.DeepCopy()); err != nil {
				t.Fatalf("applying %s %s: %v", kind, o.GetName(), err)
			}
			t.Cleanup(func() { _ = env.Client().Delete(context.Background(), o.DeepCopy()) })
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return allowed(t, as, "cert-manager.io", "certificates", "update") && allowed(t, as, "", "pods", "list"), nil
	}); err != nil {
		t.Fatal("with the census-drive overlay, the controller cannot update Certificates")
	}
	for _, n := range append(censusNeeds, driveNeeds...) {
		if !allowed(t, as, n[0], n[1], n[2]) {
			t.Errorf("with the census-drive overlay, the controller cannot %s %s (group %q)", n[2], n[1], n[0])
		}
	}
	for _, n := range driveMustNot {
		if allowed(t, as, n[0], n[1], n[2]) {
			t.Errorf("with the census-drive overlay, the controller may %s %s (group %q)", n[2], n[1], n[0])
		}
	}

	// The binary, as the ServiceAccount, drives a rotation over a ConfigMap
	// bundle: its first write, the union, goes through.
	ns := env.NewNamespace(t)
	oldCA, newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025")), hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	if _, err := env.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-ca"}, Data: map[string]string{"ca.crt": string(oldCA.CertPEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := v1alpha1.ObjectKey{Namespace: ns, Name: "cluster-ca", Key: "ca.crt"}
	tr := &v1alpha1.TrustRotation{
		TypeMeta:   metav1.TypeMeta{APIVersion: "hotcert.dev/v1alpha1", Kind: "TrustRotation"},
		ObjectMeta: metav1.ObjectMeta{Name: "drive-" + ns},
		Spec: v1alpha1.TrustRotationSpec{
			Mode:  v1alpha1.ModeDrive,
			OldCA: v1alpha1.CA{PEM: string(oldCA.CertPEM)}, NewCA: v1alpha1.CA{PEM: string(newCA.CertPEM)},
			Trust: []v1alpha1.TrustObject{{ConfigMap: &key}},
			Drive: &v1alpha1.DriveSpec{Bundle: v1alpha1.DriveBundle{ConfigMap: &key}, Reissue: v1alpha1.Reissue{External: &v1alpha1.ExternalReissue{}}},
		},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tr)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	if err := env.Client().Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), u) })
	logs := runController(t, serviceAccountKubeconfig(t, sa), append(dep.Spec.Template.Spec.Containers[0].Args,
		"--namespace="+ns, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--census-interval=1s"))
	want := hotcerttest.BundlePEM(oldCA, newCA)
	waitFor(t, "the union in the bundle ConfigMap", func(ctx context.Context) (bool, error) {
		cm, err := env.Clientset().CoreV1().ConfigMaps(ns).Get(ctx, "cluster-ca", metav1.GetOptions{})
		return err == nil && bytes.Equal([]byte(cm.Data["ca.crt"]), want), err
	})
	if l := logs.String(); strings.Contains(l, "forbidden") {
		t.Fatalf("the drive's RBAC is not enough:\n%s", l)
	}
}
