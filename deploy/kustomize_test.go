package deploy

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/deploy/internal/process"
	"github.com/hotcert/hotcert/rollout"
)

// TestKustomizeManifests applies the kustomize base, as kustomize builds it,
// to the API server, then runs the hotcert-controller binary with the
// Deployment's arguments, authenticated as the base's ServiceAccount (a token
// of its own): it adopts, rolls, records Events and holds its Lease with
// exactly the RBAC the manifests grant. With the base applied, its subtests
// check the ReferenceRule CRD and RBAC, and the overlays (the census's
// among them).
func TestKustomizeManifests(t *testing.T) {
	ctx := testContext(t)
	objs := kustomize(t, "base")
	var created []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, o := range slices.Backward(created) {
			_ = env.Client().Delete(context.Background(), o)
		}
		// The base's namespace is fixed (hotcert-system), so the next run
		// (-count=N) would apply into it while it is still terminating: wait
		// until the namespace controller has removed it.
		for _, o := range created {
			if o.GetKind() != "Namespace" {
				continue
			}
			err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
				err := env.Client().Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())
				return apierrors.IsNotFound(err), nil
			})
			if err != nil {
				t.Errorf("namespace %s still there after the test: %v", o.GetName(), err)
			}
		}
	})
	for _, o := range objs {
		err := env.Client().Create(ctx, o)
		switch {
		case err == nil && o.GetKind() != "CustomResourceDefinition":
			created = append(created, o) // the CRD stays for the chart's test
		case err != nil && !apierrors.IsAlreadyExists(err):
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", "hotcert-controller"))
	if img, want := dep.Spec.Template.Spec.Containers[0].Image, controllerImage(t); img != want {
		t.Errorf("image %s, want %s (what make image builds)", img, want)
	}
	o := containerArgs(t, dep)
	if !o.LeaderElect || o.LeaderElectionID != "hotcert-controller" {
		t.Fatalf("leader election %v %q", o.LeaderElect, o.LeaderElectionID)
	}
	role := convert[rbacv1.Role](t, find(objs, "Role", ""))
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, o.LeaderElectionID) }) {
		t.Fatalf("the Role does not name the Lease %q", o.LeaderElectionID)
	}

	sa := convert[corev1.ServiceAccount](t, find(objs, "ServiceAccount", ""))
	ns := env.NewNamespace(t)
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"a": "1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clientset().AppsV1().Deployments(ns).Create(ctx, optedInDeployment("app", "s", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The binary, with the manifest's arguments and the ServiceAccount's
	// identity; only the endpoints and the scope are the test's.
	logs := runController(t, serviceAccountKubeconfig(t, sa), append(dep.Spec.Template.Spec.Containers[0].Args,
		"--namespace="+ns, "--leader-election-namespace="+sa.Namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"))
	waitFor(t, "adoption of app", func(ctx context.Context) (bool, error) {
		d, err := env.Clientset().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Annotations[rollout.AnnotationAppliedHash] != "", err
	})
	s, err := env.Clientset().CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.StringData = map[string]string{"a": "2"}
	if _, err := env.Clientset().CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a second ReplicaSet of app", func(ctx context.Context) (bool, error) {
		rs, err := env.Clientset().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(rs.Items) == 2, err
	})
	waitFor(t, "a Rolled Event on app", func(ctx context.Context) (bool, error) {
		ev, err := env.Clientset().CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=app"})
		return err == nil && slices.ContainsFunc(ev.Items, func(e corev1.Event) bool {
			return e.Reason == "Rolled" && strings.Contains(e.Message, "Secret s key a changed")
		}), err
	})
	if _, err := env.Clientset().CoordinationV1().Leases(sa.Namespace).Get(ctx, o.LeaderElectionID, metav1.GetOptions{}); err != nil {
		t.Fatalf("no Lease: %v", err)
	}
	if l := logs.String(); strings.Contains(l, "forbidden") {
		t.Fatalf("the manifests' RBAC is not enough:\n%s", l)
	}

	as := rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
	}
	t.Run("ReferenceRules", func(t *testing.T) { checkReferenceRules(t, objs, as) })
	t.Run("webhook overlay", func(t *testing.T) {
		objs := kustomize(t, "overlays/webhook")
		checkWebhook(t, objs, true)
		// Server-side apply, dry run, over the applied base: the API server
		// validates the patched Deployment, the Service, the
		// MutatingWebhookConfiguration and cert-manager's Issuer and
		// Certificate (against cert-manager's CRDs), and stores nothing.
		for _, o := range objs {
			if err := env.Client().Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("deploy-test"), client.ForceOwnership, client.DryRunAll); err != nil {
				t.Errorf("the API server rejects %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
	t.Run("census overlay", func(t *testing.T) { checkCensus(t, sa, as) })
	t.Run("census-drive overlay", func(t *testing.T) { checkCensusDrive(t, sa, as) })
	t.Run("namespace-selector overlay", func(t *testing.T) { checkNamespaceSelectorOverlay(t, sa) })
	t.Run("dry-run overlay", func(t *testing.T) {
		dep := convert[appsv1.Deployment](t, find(kustomize(t, "overlays/dry-run"), "Deployment", "hotcert-controller"))
		if !containerArgs(t, dep).DryRun {
			t.Fatal("the overlay does not set dry run")
		}
	})
}

// checkNamespaceSelectorOverlay runs the binary with the overlay's arguments
// as the base's ServiceAccount: its RBAC lets it watch Namespaces, and it
// adopts a workload of a labelled namespace.
func checkNamespaceSelectorOverlay(t *testing.T, sa *corev1.ServiceAccount) {
	ctx := testContext(t)
	dep := convert[appsv1.Deployment](t, find(kustomize(t, "overlays/namespace-selector"), "Deployment", "hotcert-controller"))
	if got := containerArgs(t, dep).NamespaceSelectorString; got != "hotcert.dev/rollout=enabled" {
		t.Fatalf("the overlay's namespace selector is %q", got)
	}
	ns := env.NewNamespace(t)
	patch := []byte(`{"metadata":{"labels":{"hotcert.dev/rollout":"enabled"}}}`)
	if _, err := env.Clientset().CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"a": "1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Clientset().AppsV1().Deployments(ns).Create(ctx, optedInDeployment("app", "s", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One replica of its own: no Lease (the base's controller holds it).
	logs := runController(t, serviceAccountKubeconfig(t, sa), append(dep.Spec.Template.Spec.Containers[0].Args,
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0"))
	waitFor(t, "adoption of app in the labelled namespace", func(ctx context.Context) (bool, error) {
		d, err := env.Clientset().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Annotations[rollout.AnnotationAppliedHash] != "", err
	})
	if l := logs.String(); strings.Contains(l, "forbidden") {
		t.Fatalf("the manifests' RBAC is not enough for --namespace-selector:\n%s", l)
	}
}

// optedInDeployment is a Deployment opted in to rollouts, consuming key of
// Secret secret as an environment variable.
func optedInDeployment(name, secret, key string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"hotcert.dev/rollout-on-change": "true"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "app:1",
					Env: []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{
						SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key},
					}}},
				}}},
			},
		},
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as sa with
// a token the API server issues for it (TokenRequest), as a pod's projected
// token does.
func serviceAccountKubeconfig(t testing.TB, sa *corev1.ServiceAccount) string {
	t.Helper()
	tr, err := env.Clientset().CoreV1().ServiceAccounts(sa.Namespace).CreateToken(testContext(t), sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for ServiceAccount %s/%s: %v", sa.Namespace, sa.Name, err)
	}
	rc := env.Config()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "sa", Namespace: sa.Namespace}
	cfg.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runController runs the hotcert-controller binary with args and the
// kubeconfig until the test ends, and returns its output.
func runController(t *testing.T, kubeconfig string, args []string) *process.Output {
	t.Helper()
	return process.Start(t, hotcertController(t), append(args, "--kubeconfig="+kubeconfig), "KUBECONFIG=")
}
