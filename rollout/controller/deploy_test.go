package controller

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

const (
	deployDir   = "../../deploy"
	examplesDir = "../../examples"
)

// decodeYAML splits a multi-document YAML stream into objects.
func decodeYAML(t testing.TB, data []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("decoding YAML: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// kustomizeBase reads deploy/kustomize/base: every resource its
// kustomization.yaml lists.
func kustomizeBase(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(deployDir, "kustomize", "base")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Namespace string   `json:"namespace"`
		Resources []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(raw, &k, yaml.DisallowUnknownFields); err != nil {
		// labels and images are there too; read leniently for the list.
		if err := yaml.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		data, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatalf("kustomization lists %s: %v", r, err)
		}
		for _, o := range decodeYAML(t, data) {
			if o.GetNamespace() != "" && o.GetNamespace() != k.Namespace {
				t.Errorf("%s %s is in namespace %s, the kustomization's is %s", o.GetKind(), o.GetName(), o.GetNamespace(), k.Namespace)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// kustomizeOverlay reads deploy/kustomize/overlays/<name> as `kubectl
// kustomize` builds it, for what the overlays use: resources (the base and
// files of their own) and JSON 6902 "add" patches of one object, named by
// kind and name. Anything else in the kustomization fails the test, rather
// than being ignored.
func kustomizeOverlay(t testing.TB, name string) []*unstructured.Unstructured {
	t.Helper()
	dir := filepath.Join(deployDir, "kustomize", "overlays", name)
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Patches    []struct {
			Target struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"target"`
			Patch string `json:"patch"`
		} `json:"patches"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &k); err != nil {
		t.Fatalf("overlay %s uses more of kustomize than this test reads: %v", name, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range k.Resources {
		if r == "../../base" {
			objs = append(objs, kustomizeBase(t)...)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatalf("overlay %s lists %s: %v", name, r, err)
		}
		objs = append(objs, decodeYAML(t, data)...)
	}
	for _, p := range k.Patches {
		o := find(objs, p.Target.Kind, p.Target.Name)
		if o == nil || p.Target.Name == "" {
			t.Fatalf("overlay %s patches %s %q, which it does not have", name, p.Target.Kind, p.Target.Name)
		}
		var ops []struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			Value any    `json:"value"`
		}
		if err := yaml.UnmarshalStrict([]byte(p.Patch), &ops); err != nil {
			t.Fatalf("overlay %s: patch of %s: %v", name, o.GetName(), err)
		}
		for _, op := range ops {
			if op.Op != "add" || !strings.HasPrefix(op.Path, "/") {
				t.Fatalf("overlay %s: %s %s: only add operations are read here", name, op.Op, op.Path)
			}
			var tokens []string
			for _, tok := range strings.Split(op.Path[1:], "/") {
				tokens = append(tokens, strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~"))
			}
			patched, err := jsonPatchAdd(o.Object, tokens, op.Value)
			if err != nil {
				t.Fatalf("overlay %s: add %s to %s %s: %v", name, op.Path, o.GetKind(), o.GetName(), err)
			}
			o.Object = patched.(map[string]any)
		}
	}
	return objs
}

// jsonPatchAdd is RFC 6902's add: at a member of an object, set it; at an index
// of an array (or "-", its end), insert.
func jsonPatchAdd(node any, tokens []string, value any) (any, error) {
	tok, last := tokens[0], len(tokens) == 1
	switch n := node.(type) {
	case map[string]any:
		if last {
			n[tok] = value
			return n, nil
		}
		child, ok := n[tok]
		if !ok {
			return nil, fmt.Errorf("no member %q", tok)
		}
		c, err := jsonPatchAdd(child, tokens[1:], value)
		n[tok] = c
		return n, err
	case []any:
		i := len(n)
		if tok != "-" {
			var err error
			if i, err = strconv.Atoi(tok); err != nil || i < 0 || i > len(n) || (!last && i == len(n)) {
				return nil, fmt.Errorf("no index %q in an array of %d", tok, len(n))
			}
		} else if !last {
			return nil, errors.New(`"-" before the last token`)
		}
		if last {
			return slices.Insert(n, i, value), nil
		}
		c, err := jsonPatchAdd(n[i], tokens[1:], value)
		n[i] = c
		return n, err
	}
	return nil, fmt.Errorf("%q: not an object or an array", tok)
}

// isCertManager says whether o is a cert-manager object (Issuer, Certificate).
// The test API server has no cert-manager CRDs: these are checked, never
// applied.
func isCertManager(o *unstructured.Unstructured) bool {
	return o.GroupVersionKind().Group == "cert-manager.io"
}

// clusterRoles returns the ClusterRole of rules and the aggregated one (the
// read access to the kinds ReferenceRules name).
func clusterRoles(t testing.TB, objs []*unstructured.Unstructured) (rules, aggregated *rbacv1.ClusterRole) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		cr := convert[rbacv1.ClusterRole](t, o)
		if cr.AggregationRule != nil {
			aggregated = cr
		} else {
			rules = cr
		}
	}
	if rules == nil || aggregated == nil {
		t.Fatalf("want a ClusterRole of rules and an aggregated one, have %v and %v", rules, aggregated)
	}
	return rules, aggregated
}

func convert[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	if u == nil {
		t.Fatalf("missing %T", new(T))
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

// checkArgs parses a controller container's arguments with the real flags.
func checkArgs(t testing.TB, d *appsv1.Deployment) Config {
	t.Helper()
	args := d.Spec.Template.Spec.Containers[0].Args
	cfg, err := ParseArgs(args)
	if err != nil {
		t.Fatalf("args %v: %v", args, err)
	}
	return cfg
}

// TestKustomizeManifests applies deploy/kustomize/base to the API server, then
// runs the controller as its ServiceAccount, holding exactly the RBAC the
// manifests grant: it adopts, rolls, records Events and holds its Lease. With
// the base applied, its subtests check the ReferenceRule CRD and RBAC, and the
// webhook overlay.
func TestKustomizeManifests(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	objs := kustomizeBase(t)
	var created []*unstructured.Unstructured
	t.Cleanup(func() {
		for _, o := range slices.Backward(created) {
			_ = env.Client().Delete(testContext(t), o)
		}
	})
	for _, o := range objs {
		err := env.Client().Create(ctx, o)
		switch {
		case err == nil && o.GetKind() != "CustomResourceDefinition":
			// The CRD stays: other tests of this package may use it,
			// and the API server is discarded with the package's tests.
			created = append(created, o)
		case err != nil && !apierrors.IsAlreadyExists(err):
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", "hotcert-controller"))
	cfg := checkArgs(t, dep)
	if !cfg.LeaderElect || cfg.LeaderElectionID != "hotcert-controller" {
		t.Fatalf("leader election %v %q", cfg.LeaderElect, cfg.LeaderElectionID)
	}
	role := convert[rbacv1.Role](t, find(objs, "Role", ""))
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, cfg.LeaderElectionID) }) {
		t.Fatalf("the Role does not name the Lease %q", cfg.LeaderElectionID)
	}

	// The controller, as the ServiceAccount.
	sa := convert[corev1.ServiceAccount](t, find(objs, "ServiceAccount", ""))
	rc := env.Config()
	rc.Impersonate.UserName = fmt.Sprintf("system:serviceaccount:%s:%s", sa.Namespace, sa.Name)
	rc.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"}

	ns := env.NewNamespace(t)
	createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
	create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))
	c := startControllerWith(t, rc, ns, testOptions(), func(o *ctrlOptions) {
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, cfg.LeaderElectionID, sa.Namespace
		o.LeaderElectionReleaseOnCancel = true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(3*time.Second), ptr.To(2*time.Second), ptr.To(200*time.Millisecond)
	})
	waitAdopted(t, ns, "app")
	updateSecret(t, ns, "s", setKey("a", "2"))
	waitReplicaSets(t, ns, "app", 2)
	waitEvent(t, ns, "app", eventRolled, "Secret s key a changed")
	if _, err := clientset().CoordinationV1().Leases(sa.Namespace).Get(ctx, cfg.LeaderElectionID, metav1.GetOptions{}); err != nil {
		t.Fatalf("no Lease: %v", err)
	}
	if strings.Contains(c.logs.String(), "forbidden") {
		t.Fatalf("the manifests' RBAC is not enough:\n%s", c.logs)
	}

	t.Run("ReferenceRules", func(t *testing.T) { checkReferenceRules(t, objs, rc.Impersonate) })
	t.Run("webhook overlay", func(t *testing.T) {
		objs := kustomizeOverlay(t, "webhook")
		checkWebhook(t, objs, true)
		// Server-side apply, dry run, over the applied base: the API server
		// validates the patched Deployment, the Service and the
		// MutatingWebhookConfiguration and stores nothing (a registered
		// webhook would be called on every Deployment update of the
		// package's parallel tests).
		for _, o := range objs {
			if isCertManager(o) {
				continue
			}
			if err := env.Client().Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("deploy-test"), client.ForceOwnership, client.DryRunAll); err != nil {
				t.Errorf("the API server rejects %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	})
}

// checkReferenceRules checks, with the base applied, that the ReferenceRule
// CRD is served and accepts the kagent example, that the controller's
// ServiceAccount (impersonated as in as) reads ReferenceRules, and that
// examples/kagent-referencerules/rbac.yaml gives it read access to the kinds
// it names, through the aggregated ClusterRole.
func checkReferenceRules(t *testing.T, objs []*unstructured.Unstructured, as rest.ImpersonationConfig) {
	ctx := testContext(t)
	name := find(objs, "CustomResourceDefinition", "").GetName()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client().Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, err
		}
		return slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
			return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
		}), nil
	}); err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}

	raw, err := os.ReadFile(filepath.Join(examplesDir, "kagent-referencerules", "referencerules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range decodeYAML(t, raw) {
		// Dry run: a stored rule would reach the controllers of the
		// package's other tests, whose own rules for these kinds it
		// would clash with (one rule per kind); and under a generated name,
		// since the chain tests store these very rules.
		r.SetGenerateName(r.GetName() + "-")
		r.SetName("")
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
			err = env.Client().Create(ctx, r, client.DryRunAll)
			return !meta.IsNoMatchError(err), nil // the client's discovery may lag the new CRD
		}); werr != nil || err != nil {
			t.Fatalf("the API server rejects ReferenceRule %s: %v %v", r.GetGenerateName(), err, werr)
		}
		if refs, _, _ := unstructured.NestedSlice(r.Object, "spec", "referencedBy"); len(refs) > 0 {
			if f := refs[0].(map[string]any)["format"]; f != "Name" {
				t.Errorf("ReferenceRule %s: format defaulted to %v, want Name", r.GetGenerateName(), f)
			}
		}
	}

	can := func(group, resource, verb string) bool { // resource: "name" or "name/subresource"
		t.Helper()
		resource, sub, _ := strings.Cut(resource, "/")
		sar, err := clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: as.UserName, Groups: as.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Subresource: sub, Verb: verb},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	for _, verb := range []string{"get", "list", "watch"} {
		if !can("hotcert.dev", "referencerules", verb) {
			t.Errorf("the controller cannot %s referencerules.hotcert.dev", verb)
		}
	}
	if !can("hotcert.dev", "referencerules/status", "update") {
		t.Error("the controller cannot write the status of referencerules.hotcert.dev")
	}
	if can("hotcert.dev", "referencerules", "update") {
		t.Error("the controller may change ReferenceRules themselves")
	}
	if can("kagent.dev", "agents", "list") {
		t.Fatal("the controller reads agents.kagent.dev before anyone granted it")
	}

	raw, err = os.ReadFile(filepath.Join(examplesDir, "kagent-referencerules", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	grant := decodeYAML(t, raw)
	if len(grant) != 1 || grant[0].GetKind() != "ClusterRole" {
		t.Fatalf("rbac.yaml: want one ClusterRole, have %d objects", len(grant))
	}
	_, aggregated := clusterRoles(t, objs)
	sel, err := metav1.LabelSelectorAsSelector(&aggregated.AggregationRule.ClusterRoleSelectors[0])
	if err != nil || len(aggregated.AggregationRule.ClusterRoleSelectors) != 1 {
		t.Fatalf("aggregation rule %v: %v", aggregated.AggregationRule, err)
	}
	if !sel.Matches(labels.Set(grant[0].GetLabels())) {
		t.Fatalf("the aggregated ClusterRole (%s) does not select rbac.yaml's labels %v", sel, grant[0].GetLabels())
	}
	if err := env.Client().Create(ctx, grant[0]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client().Delete(testContext(t), grant[0]) })
	// kube-controller-manager's clusterrole-aggregation controller is not
	// among the controllers the test runs: do what it does, set the
	// aggregated ClusterRole's rules to those of the ClusterRoles selected.
	var selected rbacv1.ClusterRoleList
	if err := env.Client().List(ctx, &selected, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	live := &rbacv1.ClusterRole{}
	if err := env.Client().Get(ctx, client.ObjectKey{Name: aggregated.Name}, live); err != nil {
		t.Fatal(err)
	}
	live.Rules = nil
	for _, cr := range selected.Items {
		live.Rules = append(live.Rules, cr.Rules...)
	}
	if err := env.Client().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	for _, resource := range []string{"agents", "modelconfigs"} {
		for _, verb := range []string{"get", "list", "watch"} {
			if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
				return can("kagent.dev", resource, verb), nil
			}); err != nil {
				t.Errorf("with rbac.yaml, the controller cannot %s %s.kagent.dev", verb, resource)
			}
		}
	}
	if can("kagent.dev", "agents", "patch") {
		t.Error("rbac.yaml grants more than reading")
	}
}

// checkWebhook checks that the webhook's objects fit together: the Deployment
// serves the webhook, with the certificate of the Secret it mounts, on a port
// the Service reaches; the MutatingWebhookConfiguration calls that Service as
// the webhook must be called; with cert-manager, the Certificate is for the
// Service's names, fills that Secret and the caBundle; without, the caBundle is
// given.
func checkWebhook(t *testing.T, objs []*unstructured.Unstructured, certManager bool) {
	t.Helper()
	dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
	cfg := checkArgs(t, dep)
	if !cfg.webhookEnabled() {
		t.Fatalf("the Deployment does not serve the webhook: %v", dep.Spec.Template.Spec.Containers[0].Args)
	}
	pod := dep.Spec.Template.Spec
	_, port, err := net.SplitHostPort(cfg.WebhookAddr)
	if err != nil {
		t.Fatalf("--webhook-bind-address %q: %v", cfg.WebhookAddr, err)
	}
	i := slices.IndexFunc(pod.Containers[0].Ports, func(p corev1.ContainerPort) bool { return strconv.Itoa(int(p.ContainerPort)) == port })
	if i < 0 {
		t.Fatalf("no container port %s", port)
	}
	containerPort := pod.Containers[0].Ports[i]

	// The certificate and key: tls.crt and tls.key of a Secret mounted as a
	// folder (a subPath mount would never see a renewal).
	dir := filepath.Dir(cfg.WebhookCertFile)
	if filepath.Base(cfg.WebhookCertFile) != "tls.crt" || cfg.WebhookKeyFile != filepath.Join(dir, "tls.key") {
		t.Errorf("--webhook-cert-file %s, --webhook-key-file %s: want tls.crt and tls.key of one folder", cfg.WebhookCertFile, cfg.WebhookKeyFile)
	}
	i = slices.IndexFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if i < 0 || pod.Containers[0].VolumeMounts[i].SubPath != "" {
		t.Fatalf("%s is not a volume mounted as a folder: %v", dir, pod.Containers[0].VolumeMounts)
	}
	mount := pod.Containers[0].VolumeMounts[i]
	i = slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == mount.Name })
	if i < 0 || pod.Volumes[i].Secret == nil {
		t.Fatalf("volume %s is not a Secret", mount.Name)
	}
	secretName := pod.Volumes[i].Secret.SecretName

	mwc := convert[admissionregistrationv1.MutatingWebhookConfiguration](t, find(objs, "MutatingWebhookConfiguration", ""))
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(mwc.Webhooks))
	}
	w := mwc.Webhooks[0]
	if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore: the webhook must never block a write", ptr.Deref(w.FailurePolicy, ""))
	}
	if ptr.Deref(w.SideEffects, "") != admissionregistrationv1.SideEffectClassNone || !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) || ptr.Deref(w.TimeoutSeconds, 0) != 5 {
		t.Errorf("sideEffects %v, admissionReviewVersions %v, timeoutSeconds %v: want None, [v1], 5", ptr.Deref(w.SideEffects, ""), w.AdmissionReviewVersions, ptr.Deref(w.TimeoutSeconds, 0))
	}
	want := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
			Resources: []string{"deployments", "statefulsets", "daemonsets"},
			Scope:     ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
	if !reflect.DeepEqual(w.Rules, want) {
		t.Errorf("rules %+v, want %+v", w.Rules, want)
	}
	nsSel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	if nsSel.Matches(labels.Set{corev1.LabelMetadataName: "kube-system"}) || !nsSel.Matches(labels.Set{corev1.LabelMetadataName: "agents"}) {
		t.Errorf("namespaceSelector %s: want every namespace but kube-system", nsSel)
	}

	ref := w.ClientConfig.Service
	if ref == nil || ptr.Deref(ref.Path, "") != "/mutate" {
		t.Fatalf("clientConfig %+v: want a Service, path /mutate", w.ClientConfig)
	}
	svc := convert[corev1.Service](t, find(objs, "Service", ref.Name))
	if svc.Namespace != ref.Namespace || svc.Namespace != dep.Namespace {
		t.Errorf("Service %s/%s, called as %s/%s, Deployment in %s", svc.Namespace, svc.Name, ref.Namespace, ref.Name, dep.Namespace)
	}
	i = slices.IndexFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == ptr.Deref(ref.Port, 443) })
	if i < 0 {
		t.Fatalf("Service %s has no port %d", svc.Name, ptr.Deref(ref.Port, 443))
	}
	if tp := svc.Spec.Ports[i].TargetPort; tp != intstr.FromString(containerPort.Name) && tp != intstr.FromInt32(containerPort.ContainerPort) {
		t.Errorf("Service %s targets port %s, the webhook's is %s (%d)", svc.Name, tp.String(), containerPort.Name, containerPort.ContainerPort)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the controller's pods %v", svc.Spec.Selector, dep.Spec.Template.Labels)
	}

	cert := find(objs, "Certificate", "")
	if !certManager {
		if cert != nil || find(objs, "Issuer", "") != nil || mwc.Annotations["cert-manager.io/inject-ca-from"] != "" {
			t.Error("cert-manager objects without cert-manager")
		}
		if b, _ := pem.Decode(w.ClientConfig.CABundle); b == nil || b.Type != "CERTIFICATE" {
			t.Errorf("caBundle %q is not PEM", w.ClientConfig.CABundle)
		}
		return
	}
	if cert == nil || !isCertManager(cert) || cert.GetNamespace() != svc.Namespace {
		t.Fatalf("no cert-manager Certificate in %s", svc.Namespace)
	}
	host := svc.Name + "." + svc.Namespace + ".svc"
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if !slices.Contains(dnsNames, host) || slices.ContainsFunc(dnsNames, func(n string) bool { return n != host && n != host+".cluster.local" }) {
		t.Errorf("Certificate dnsNames %v, want %s (and %s.cluster.local)", dnsNames, host, host)
	}
	if got, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); got != secretName {
		t.Errorf("Certificate writes Secret %q, the pod mounts %q", got, secretName)
	}
	issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
	if kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind"); kind != "Issuer" || find(objs, "Issuer", issuer) == nil {
		t.Errorf("Certificate issuer %s %q is not among the objects", kind, issuer)
	}
	if got, want := mwc.Annotations["cert-manager.io/inject-ca-from"], cert.GetNamespace()+"/"+cert.GetName(); got != want {
		t.Errorf("cert-manager.io/inject-ca-from %q, want %q", got, want)
	}
	if len(w.ClientConfig.CABundle) != 0 {
		t.Error("a caBundle, which cert-manager injects")
	}
}

// TestKustomizeAndHelmCRDsAreTheAPIs checks that the CRD copies in
// deploy/ are the one the API package embeds.
func TestKustomizeAndHelmCRDsAreTheAPIs(t *testing.T) {
	for _, p := range []string{
		filepath.Join(deployDir, "kustomize", "base", "hotcert.dev_referencerules.yaml"),
		filepath.Join(deployDir, "helm", "hotcert-controller", "crds", "hotcert.dev_referencerules.yaml"),
	} {
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v1alpha1.CRDYAML) {
			t.Errorf("%s differs from rollout/api/v1alpha1/crd/hotcert.dev_referencerules.yaml: copy it", p)
		}
	}
}

// TestKustomizeDryRunOverlay checks the overlay's patch applies to the base.
func TestKustomizeDryRunOverlay(t *testing.T) {
	dep := convert[appsv1.Deployment](t, find(kustomizeOverlay(t, "dry-run"), "Deployment", "hotcert-controller"))
	if cfg := checkArgs(t, dep); !cfg.DryRun {
		t.Fatal("the overlay does not set dry run")
	}
}

// TestHelmChart renders the chart with Helm's template language (the subset it
// uses), checks that its RBAC is the kustomize RBAC, that the controller
// accepts its arguments, and that the API server accepts every object
// (server-side dry run), the CRD of crds/ included.
func TestHelmChart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ns := env.NewNamespace(t)
	base := kustomizeBase(t)
	wantRules, wantAggregated := clusterRoles(t, base)
	chart := filepath.Join(deployDir, "helm", "hotcert-controller")
	for _, tc := range []struct {
		name   string
		values map[string]any
		check  func(t *testing.T, objs []*unstructured.Unstructured, cfg Config)
	}{
		{"defaults", nil, func(t *testing.T, objs []*unstructured.Unstructured, cfg Config) {
			if find(objs, "PodDisruptionBudget", "") == nil || find(objs, "Service", "") == nil {
				t.Error("missing PodDisruptionBudget or Service")
			}
			if !cfg.ReferenceRules || cfg.webhookEnabled() || find(objs, "MutatingWebhookConfiguration", "") != nil {
				t.Errorf("reference rules %v, webhook %q: want on, off", cfg.ReferenceRules, cfg.WebhookAddr)
			}
		}},
		{"dry run, namespaces, hash key, one replica, no reference rules", map[string]any{
			"replicaCount": 1,
			"controller":   map[string]any{"dryRun": true, "namespaces": []any{"team-a", "team-b"}, "hashKeySecret": "hotcert-hash-key", "referenceRules": false},
		}, func(t *testing.T, objs []*unstructured.Unstructured, cfg Config) {
			if !cfg.DryRun || !reflect.DeepEqual(cfg.Namespaces, []string{"team-a", "team-b"}) || cfg.HashKeyFile == "" || cfg.ReferenceRules {
				t.Errorf("values not passed: %+v", cfg)
			}
			if find(objs, "PodDisruptionBudget", "") != nil {
				t.Error("a PodDisruptionBudget for one replica")
			}
		}},
		{"webhook with cert-manager", map[string]any{
			"webhook": map[string]any{"enabled": true},
		}, func(t *testing.T, objs []*unstructured.Unstructured, _ Config) {
			checkWebhook(t, objs, true)
		}},
		{"webhook with a Secret of one's own, and a hash key", map[string]any{
			"controller": map[string]any{"hashKeySecret": "hotcert-hash-key"},
			"webhook": map[string]any{"enabled": true, "certManager": map[string]any{"enabled": false},
				"secretName": "my-webhook-tls", "caBundle": base64.StdEncoding.EncodeToString(testCA.CertPEM)},
		}, func(t *testing.T, objs []*unstructured.Unstructured, cfg Config) {
			checkWebhook(t, objs, false)
			dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
			var secrets []string
			for _, v := range dep.Spec.Template.Spec.Volumes {
				secrets = append(secrets, v.Secret.SecretName)
			}
			if !slices.Equal(secrets, []string{"hotcert-hash-key", "my-webhook-tls"}) || cfg.HashKeyFile == "" {
				t.Errorf("volumes of Secrets %v, hash key file %q", secrets, cfg.HashKeyFile)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decodeYAML(t, renderChart(t, chart, "hotcert", ns, tc.values))
			for _, o := range objs {
				if isCertManager(o) {
					continue // no cert-manager CRDs here; checkWebhook checks them
				}
				err := env.Client().Create(ctx, o, client.DryRunAll)
				if o.GetKind() == "CustomResourceDefinition" && apierrors.IsAlreadyExists(err) {
					continue // validated before the name clashes with the CRD another test installed
				}
				if err != nil {
					t.Fatalf("the API server rejects %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			if find(objs, "CustomResourceDefinition", "referencerules.hotcert.dev") == nil {
				t.Error("no ReferenceRule CRD")
			}
			rules, aggregated := clusterRoles(t, objs)
			if !reflect.DeepEqual(rules.Rules, wantRules.Rules) {
				t.Errorf("chart ClusterRole rules %v differ from kustomize's %v", rules.Rules, wantRules.Rules)
			}
			if !reflect.DeepEqual(aggregated.AggregationRule, wantAggregated.AggregationRule) {
				t.Errorf("chart aggregation rule %v differs from kustomize's %v", aggregated.AggregationRule, wantAggregated.AggregationRule)
			}
			dep := convert[appsv1.Deployment](t, find(objs, "Deployment", ""))
			sa := dep.Spec.Template.Spec.ServiceAccountName
			for _, b := range objs {
				if b.GetKind() != "ClusterRoleBinding" {
					continue
				}
				crb := convert[rbacv1.ClusterRoleBinding](t, b)
				if len(crb.Subjects) != 1 || crb.Subjects[0].Name != sa || crb.Subjects[0].Namespace != ns {
					t.Errorf("ClusterRoleBinding %s binds %v, not the controller's ServiceAccount %s/%s", crb.Name, crb.Subjects, ns, sa)
				}
			}
			cfg := checkArgs(t, dep)
			role := convert[rbacv1.Role](t, find(objs, "Role", ""))
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, cfg.LeaderElectionID) }) {
				t.Errorf("the Role does not name the Lease %q", cfg.LeaderElectionID)
			}
			tc.check(t, objs, cfg)
		})
	}
	t.Run("webhook without cert-manager needs a Secret", func(t *testing.T) {
		_, err := renderChartErr(t, chart, "hotcert", ns, map[string]any{
			"webhook": map[string]any{"enabled": true, "certManager": map[string]any{"enabled": false}, "caBundle": "Cg=="},
		})
		if err == nil || !strings.Contains(err.Error(), "webhook.secretName is required") {
			t.Fatalf("rendered, or failed with %v", err)
		}
	})
}

// renderChart renders a chart as `helm template --include-crds` does (crds/
// first, as they are, then the templates), for the template functions the
// chart uses.
func renderChart(t testing.TB, dir, release, namespace string, overrides map[string]any) []byte {
	t.Helper()
	out, err := renderChartErr(t, dir, release, namespace, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// renderChartErr is renderChart, returning the error of a template that fails
// (Helm's `required`, notably).
func renderChartErr(t testing.TB, dir, release, namespace string, overrides map[string]any) ([]byte, error) {
	t.Helper()
	var chart map[string]any
	readYAML(t, filepath.Join(dir, "Chart.yaml"), &chart)
	var values map[string]any
	readYAML(t, filepath.Join(dir, "values.yaml"), &values)
	mergeValues(values, overrides)
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": release, "Namespace": namespace, "Service": "Helm"},
		"Chart":   map[string]any{"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
	}
	root := template.New("chart").Option("missingkey=error")
	root.Funcs(template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b strings.Builder
			err := root.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"toYaml": func(v any) (string, error) {
			b, err := yaml.Marshal(v)
			return strings.TrimSuffix(string(b), "\n"), err
		},
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"quote": func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
		"default": func(d, v any) any {
			if v == nil || reflect.ValueOf(v).IsZero() {
				return d
			}
			return v
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"int":        func(v any) int { return int(reflect.ValueOf(v).Convert(reflect.TypeFor[float64]()).Float()) },
		"required": func(msg string, v any) (any, error) {
			if s, ok := v.(string); v == nil || ok && s == "" {
				return nil, errors.New(msg)
			}
			return v, nil
		},
	})
	files, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := root.New(filepath.Base(f)).Parse(string(raw)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	var out bytes.Buffer
	crds, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(crds)
	for _, f := range crds {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "---\n# Source: crds/%s\n%s\n", filepath.Base(f), raw)
	}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") || !strings.HasSuffix(name, ".yaml") {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n", name)
		if err := root.ExecuteTemplate(&out, name, data); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", name, err)
		}
		out.WriteString("\n")
	}
	return out.Bytes(), nil
}

func readYAML(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		if n, ok := v.(int); ok {
			v = float64(n) // as YAML numbers decode
		}
		dst[k] = v
	}
}
