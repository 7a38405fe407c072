package kubetest_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/internal/kubetest"
)

// env is the control plane shared by this package's tests (see TestMain).
var env *kubetest.Env

func TestMain(m *testing.M) {
	kubetest.Main(m, &env, kubetest.WithControllerManager())
}

// pollTimeout bounds every wait for the cluster to converge.
const pollTimeout = 60 * time.Second

func testContext(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 2*pollTimeout)
	t.Cleanup(cancel)
	return c
}

func TestSecretRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ns := env.NewNamespace(t)

	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
		Data:       map[string][]byte{"tls.key": []byte("secret bytes")},
	}
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, want, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}

	var got corev1.Secret
	if err := env.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "s"}, &got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if string(got.Data["tls.key"]) != "secret bytes" {
		t.Fatalf("got data %q, want %q", got.Data, want.Data)
	}
}

func TestRestrictedConfig(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ns := env.NewNamespace(t)
	for _, name := range []string{"mine", "other"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create secret %s: %v", name, err)
		}
	}

	cfg := env.NewRestrictedConfig(t, "secret-reader", []rbacv1.PolicyRule{{
		APIGroups:     []string{""},
		Resources:     []string{"secrets"},
		Verbs:         []string{"get"},
		ResourceNames: []string{"mine"},
	}}, ns)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "mine", metav1.GetOptions{}); err != nil {
		t.Errorf("get the granted secret: %v", err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get another secret: got %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets in the namespace: got %v, want Forbidden", err)
	}
	if _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets in all namespaces: got %v, want Forbidden", err)
	}
	// The user is who the API server sees.
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review: %v", err)
	}
	if got := review.Status.UserInfo.Username; got != "secret-reader" {
		t.Errorf("API server sees user %q, want secret-reader", got)
	}
}

func TestRestrictedConfigClusterScope(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	cfg := env.NewRestrictedConfig(t, "namespace-lister", []rbacv1.PolicyRule{{
		APIGroups: []string{""},
		Resources: []string{"namespaces"},
		Verbs:     []string{"list"},
	}}, "")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list namespaces: %v", err)
	}
	if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list secrets: got %v, want Forbidden", err)
	}
}

func TestControllerManagerCreatesReplicaSet(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	waitForReplicaSet(t, ns, "web")
}

// TestRestart runs alone (not parallel): it takes the shared API server down.
func TestRestart(t *testing.T) {
	ctx := testContext(t)
	ns := env.NewNamespace(t)
	cs := env.Clientset()
	restricted, err := kubernetes.NewForConfig(env.NewRestrictedConfig(t, "restart-reader", []rbacv1.PolicyRule{{
		APIGroups: []string{""},
		Resources: []string{"secrets"},
		Verbs:     []string{"get", "list", "watch"},
	}}, ns))
	if err != nil {
		t.Fatal(err)
	}

	// An informer started before the restart, as the restricted user.
	var mu sync.Mutex
	seen := map[string]bool{}
	factory := informers.NewSharedInformerFactoryWithOptions(restricted, 0, informers.WithNamespace(ns))
	informer := factory.Core().V1().Secrets().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			seen[obj.(*corev1.Secret).Name] = true
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer func() {
		close(stop)
		factory.Shutdown()
	}()
	factory.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}

	create := func(name string) {
		t.Helper()
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		if _, err := cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create secret %s: %v", name, err)
		}
	}
	create("before")

	start := time.Now()
	env.Restart(t)
	t.Logf("API server restarted in %v", time.Since(start).Round(time.Millisecond))

	// The same clients work at once, data kept.
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("admin get after restart: %v", err)
	}
	if _, err := restricted.CoreV1().Secrets(ns).Get(ctx, "before", metav1.GetOptions{}); err != nil {
		t.Fatalf("restricted get after restart: %v", err)
	}
	create("after")

	// The informer reconnects and sees what happened after the restart.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return seen["before"] && seen["after"], nil
	})
	if err != nil {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("informer after restart: saw %v, want before and after: %v", seen, err)
	}
	t.Logf("informer caught up %v after the restart began", time.Since(start).Round(time.Millisecond))

	// The controller manager reconnects too.
	waitForReplicaSet(t, ns, "after-restart")
	t.Logf("controller manager acted %v after the restart began", time.Since(start).Round(time.Millisecond))
}

// waitForReplicaSet creates a Deployment and waits for the controller manager
// to create its ReplicaSet.
func waitForReplicaSet(t *testing.T, ns, name string) {
	t.Helper()
	ctx := testContext(t)
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "web",
					Image: "registry.invalid/web:1",
				}}},
			},
		},
	}
	start := time.Now()
	created, err := env.Clientset().AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		rss, err := env.Clientset().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, rs := range rss.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == created.UID {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ReplicaSet for Deployment %s/%s within %v: %v", ns, name, pollTimeout, err)
	}
	t.Logf("ReplicaSet for %s/%s appeared after %v", ns, name, time.Since(start).Round(time.Millisecond))
}

// TestStart starts an Env of the test's own, with a CRD.
func TestStart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.hotcert.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.hotcert.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
						},
					},
				},
			}},
		},
	}

	start := time.Now()
	own := kubetest.Start(t, kubetest.WithCRDs(crd))
	t.Logf("Env with a CRD started in %v", time.Since(start).Round(time.Millisecond))

	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.hotcert.dev", Version: "v1", Kind: "Widget"})
	w.SetNamespace("default")
	w.SetName("w")
	if err := unstructured.SetNestedField(w.Object, "blue", "spec", "color"); err != nil {
		t.Fatal(err)
	}
	if err := own.Client().Create(ctx, w); err != nil {
		t.Fatalf("create widget: %v", err)
	}
	// The shared Env does not have the CRD: the two are separate clusters.
	if err := env.Client().Create(ctx, w.DeepCopy()); err == nil {
		t.Fatal("the shared Env accepted a Widget, want no such kind")
	}
}

// fatalTB records a Fatal call and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.mu.Lock()
	for _, a := range args {
		if err, ok := a.(error); ok {
			f.fatal += err.Error()
		}
	}
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) Skip(...any) { panic("kubetest skipped a test") }

func TestMissingBinariesFail(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", t.TempDir())

	_, err := kubetest.New()
	if err == nil || !strings.Contains(err.Error(), "make k8s-bins") {
		t.Fatalf("New with no binaries: got error %v, want one saying to run make k8s-bins", err)
	}

	// Start fails the test (never skips it).
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		kubetest.Start(tb)
		t.Error("Start returned with no binaries")
	}()
	<-done
	if !strings.Contains(tb.fatal, "make k8s-bins") {
		t.Errorf("Start with no binaries: Fatal(%q), want a message saying to run make k8s-bins", tb.fatal)
	}
}
