package deploy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/hotcert/hotcert/cmd/hotcert-controller/app/options"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// censusNeeds is what the census does with the API server (group, resource,
// verb), every one of which the controller's ServiceAccount must be allowed
// with the census component (the base's rules included).
var censusNeeds = [][3]string{
	{"hotcert.dev", "trustrotations", "get"}, {"hotcert.dev", "trustrotations", "list"}, {"hotcert.dev", "trustrotations", "watch"},
	{"hotcert.dev", "trustrotations/status", "update"},
	{"", "pods", "list"}, {"", "pods", "watch"},
	{"discovery.k8s.io", "endpointslices", "list"}, {"discovery.k8s.io", "endpointslices", "watch"},
	{"", "configmaps", "get"}, {"", "configmaps", "list"}, {"", "configmaps", "watch"},
	{"", "secrets", "get"},
	{"certificates.k8s.io", "clustertrustbundles", "get"}, {"certificates.k8s.io", "clustertrustbundles", "list"}, {"certificates.k8s.io", "clustertrustbundles", "watch"},
	{"trust.cert-manager.io", "bundles", "get"},
	{"certificates.k8s.io", "podcertificaterequests", "list"},
	{"", "namespaces", "list"},
	{"", "events", "create"}, {"", "events", "patch"},
}

// censusMustNot is what the controller's ServiceAccount must not be allowed,
// census or not: it changes no TrustRotation's spec, no pod, no slice, no
// trust object, and reads no pod's logs.
var censusMustNot = [][3]string{
	{"hotcert.dev", "trustrotations", "create"}, {"hotcert.dev", "trustrotations", "update"}, {"hotcert.dev", "trustrotations", "patch"}, {"hotcert.dev", "trustrotations", "delete"},
	{"hotcert.dev", "trustrotations/status", "patch"},
	{"", "pods", "get"}, {"", "pods", "create"}, {"", "pods", "update"}, {"", "pods", "patch"}, {"", "pods", "delete"},
	{"", "pods/log", "get"}, {"", "pods/exec", "create"}, {"", "pods/exec", "get"}, {"", "pods/eviction", "create"}, {"", "pods/status", "update"},
	{"discovery.k8s.io", "endpointslices", "get"}, {"discovery.k8s.io", "endpointslices", "create"}, {"discovery.k8s.io", "endpointslices", "update"},
	{"", "endpoints", "list"}, {"", "services", "list"},
	{"", "configmaps", "update"}, {"", "configmaps", "patch"}, {"", "secrets", "create"}, {"", "secrets", "update"}, {"", "secrets", "patch"}, {"", "secrets", "delete"},
	{"certificates.k8s.io", "clustertrustbundles", "create"}, {"certificates.k8s.io", "clustertrustbundles", "update"}, {"certificates.k8s.io", "clustertrustbundles", "delete"},
	{"certificates.k8s.io", "signers", "attest"},
	{"certificates.k8s.io", "podcertificaterequests", "get"}, {"certificates.k8s.io", "podcertificaterequests", "update"}, {"certificates.k8s.io", "podcertificaterequests/status", "update"},
	{"trust.cert-manager.io", "bundles", "list"}, {"trust.cert-manager.io", "bundles", "update"}, {"trust.cert-manager.io", "bundles", "patch"},
	{"", "serviceaccounts/token", "create"}, {"", "nodes", "list"}, {"", "nodes/proxy", "get"},
}

// checkCensus, with the base applied, applies the census component's RBAC
// and checks with SubjectAccessReviews that the controller's ServiceAccount
// (as) may do what the census needs and nothing of censusMustNot; then it
// runs the binary with the overlay's arguments, as that ServiceAccount,
// against a TrustRotation: it writes the census into the status, and nothing
// is forbidden.
func checkCensus(t *testing.T, sa *corev1.ServiceAccount, as rest.ImpersonationConfig) {
	ctx := testContext(t)
	objs := kustomize(t, "overlays/census")
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", "hotcert-controller"))
	if o := containerArgs(t, dep); !o.Census {
		t.Fatal("the overlay does not set --census")
	}
	role := convert[rbacv1.ClusterRole](t, find(objs, "ClusterRole", "hotcert-controller-census"))
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "secrets" || res == "configmaps" || strings.Contains(res, "*") || strings.Contains(strings.Join(r.Verbs, ","), "*") {
				t.Errorf("the census's ClusterRole grants %v on %s: the base's rules cover what it reads of ConfigMaps and Secrets", r.Verbs, res)
			}
		}
	}
	binding := convert[rbacv1.ClusterRoleBinding](t, find(objs, "ClusterRoleBinding", "hotcert-controller-census"))
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Fatalf("the census's ClusterRoleBinding binds %v, not %s/%s", binding.Subjects, sa.Namespace, sa.Name)
	}

	// Without the component, the base's ServiceAccount cannot take a census.
	if allowed(t, as, "", "pods", "list") || allowed(t, as, "hotcert.dev", "trustrotations", "list") {
		t.Fatal("the base alone lets the controller list pods or TrustRotations")
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		o := find(objs, kind, "hotcert-controller-census")
		if err := env.Client().Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("applying %s %s: %v", kind, o.GetName(), err)
		}
		t.Cleanup(func() { _ = env.Client().Delete(context.Background(), o.DeepCopy()) })
	}
	// The API server's RBAC authorizer sees new roles from its informers:
	// wait until it sees this one, then ask.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return allowed(t, as, "", "pods", "list"), nil
	}); err != nil {
		t.Fatal("with the census component, the controller cannot list pods")
	}
	for _, n := range censusNeeds {
		if !allowed(t, as, n[0], n[1], n[2]) {
			t.Errorf("with the census component, the controller cannot %s %s (group %q)", n[2], n[1], n[0])
		}
	}
	for _, n := range censusMustNot {
		if allowed(t, as, n[0], n[1], n[2]) {
			t.Errorf("with the census component, the controller may %s %s (group %q)", n[2], n[1], n[0])
		}
	}

	// The binary, with the overlay's arguments, as the ServiceAccount. Its
	// rollout controller is kept to a namespace of the test's (so is the
	// census's pod cache: see docs/census.md); the Lease is the base's.
	ns := env.NewNamespace(t)
	oldCA, newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025")), hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	if _, err := env.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-ca"}, Data: map[string]string{"ca.crt": string(hotcerttest.BundlePEM(oldCA, newCA))},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr := &v1alpha1.TrustRotation{
		TypeMeta:   metav1.TypeMeta{APIVersion: "hotcert.dev/v1alpha1", Kind: "TrustRotation"},
		ObjectMeta: metav1.ObjectMeta{Name: "deploy-" + ns},
		Spec: v1alpha1.TrustRotationSpec{
			OldCA: v1alpha1.CA{PEM: string(oldCA.CertPEM)}, NewCA: v1alpha1.CA{PEM: string(newCA.CertPEM)},
			Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "cluster-ca", Key: "ca.crt"}}},
		},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tr)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	waitFor(t, "the TrustRotation CRD to serve", func(ctx context.Context) (bool, error) {
		err := env.Client().Create(ctx, u)
		if meta.IsNoMatchError(err) {
			return false, nil // the client's discovery may lag the new CRD
		}
		return true, err
	})
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), u) })

	logs := runController(t, serviceAccountKubeconfig(t, sa), append(dep.Spec.Template.Spec.Containers[0].Args,
		"--namespace="+ns, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0", "--census-interval=1s"))
	waitFor(t, "the census in the TrustRotation's status", func(ctx context.Context) (bool, error) {
		got := &v1alpha1.TrustRotation{}
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		if err := env.Client().Get(ctx, client.ObjectKey{Name: tr.Name}, live); err != nil {
			return false, err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, got); err != nil {
			return false, err
		}
		if len(got.Status.Trust) != 1 || got.Status.Trust[0].HoldNew != 1 {
			return false, nil
		}
		if e := got.Status.Trust[0].Error; e != "" {
			t.Fatalf("the census could not read the ConfigMap: %s", e)
		}
		var types []string
		for _, c := range got.Status.Conditions {
			types = append(types, c.Type)
		}
		return reflect.DeepEqual(types, []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA}), nil
	})
	if l := logs.String(); strings.Contains(l, "forbidden") {
		t.Fatalf("the census's RBAC is not enough:\n%s", l)
	}
}

// TestCensusPrometheusPatchOfTheDocs: the kustomize patch docs/census.md
// gives for a Prometheus behind kube-rbac-proxy, over the base and the
// census component, gives the controller arguments it accepts, with the
// credentials for that Prometheus.
func TestCensusPrometheusPatchOfTheDocs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "docs", "census.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(patches:\n.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("docs/census.md has no kustomize patch")
	}
	// The manifests, in memory, with an overlay of the docs' patch beside.
	fs := filesys.MakeFsInMemory()
	if err := filepath.WalkDir(kustomizeDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fs.WriteFile(filepath.Join("/", p), data)
	}); err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\ncomponents: [../components/census]\n" + string(m[1])
	if err := fs.WriteFile(filepath.Join("/", kustomizeDir, "docs-prometheus", "kustomization.yaml"), []byte(k)); err != nil {
		t.Fatal(err)
	}
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, filepath.Join("/", kustomizeDir, "docs-prometheus"))
	if err != nil {
		t.Fatalf("kustomize build with the docs' patch: %v", err)
	}
	out, err := rm.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	o := containerArgs(t, convert[appsv1.Deployment](t, find(kubetest.DecodeYAML(t, out), "Deployment", "hotcert-controller")))
	want := options.Prometheus{URL: "https://prometheus.monitoring.svc:9091", BearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
		CAFile: "/var/run/secrets/kubernetes.io/serviceaccount/service-ca.crt"}
	if !o.Census || o.CensusPrometheus != want {
		t.Fatalf("census %v, Prometheus %+v; want on, %+v", o.Census, o.CensusPrometheus, want)
	}
}
