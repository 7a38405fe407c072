package referencerules_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if fuzzing() || flag.Lookup("test.list").Value.String() != "" {
		// The fuzz targets (go test -fuzz, and each of its workers) read no
		// cluster: no control plane per worker, nor to list the tests.
		os.Exit(m.Run())
	}
	kubetest.Main(m, &env, kubetest.WithCRDPaths("testdata/crds.yaml", "../../api/v1alpha1/crd"))
}

// fuzzing reports whether the test binary runs a fuzz target's fuzzing
// (not its seed corpus as an ordinary test).
func fuzzing() bool {
	for _, name := range []string{"test.fuzz", "test.fuzzworker"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" && f.Value.String() != "false" {
			return true
		}
	}
	return false
}

var (
	modelConfig   = v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "ModelConfig"}
	agent         = v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "Agent"}
	modelProvider = v1alpha1.GroupVersionKind{Group: "kagent.dev", Version: "v1alpha2", Kind: "ModelProvider"}
	gateway       = v1alpha1.GroupVersionKind{Group: "example.dev", Version: "v1", Kind: "Gateway"}
)

// rules: kagent's two (docs/rollout-controller.md), a ModelProvider a
// ModelConfig names ("namespace/name" form) for a third hop, and a Gateway
// whose listeners list Secrets, run by Deployments selected by label.
func rules() []v1alpha1.ReferenceRule {
	return []v1alpha1.ReferenceRule{
		{ObjectMeta: metav1.ObjectMeta{Name: "kagent-modelconfig"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target: modelConfig,
			SecretRefs: []v1alpha1.DataRef{
				{Name: v1alpha1.FieldRef{Path: "spec.apiKeySecret"}, Key: &v1alpha1.FieldRef{Path: "spec.apiKeySecretKey", Default: "api-key"}},
				{Name: v1alpha1.FieldRef{Path: "spec.tls.caCertSecretRef"}, Key: &v1alpha1.FieldRef{Path: "spec.tls.caCertSecretKey", Default: "ca.crt"}},
			},
			ReferencedBy: []v1alpha1.Referrer{{Target: agent, Name: v1alpha1.FieldRef{Path: "spec.declarative.modelConfig", Default: "default-model-config"}}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kagent-agent"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target: agent, Workloads: &v1alpha1.WorkloadRule{OwnerReferences: &v1alpha1.OwnerReferences{}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kagent-modelprovider"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target:       modelProvider,
			SecretRefs:   []v1alpha1.DataRef{{Name: v1alpha1.FieldRef{Path: "spec.secretRef.name"}, Key: &v1alpha1.FieldRef{Path: "spec.secretRef.key"}}},
			ReferencedBy: []v1alpha1.Referrer{{Target: modelConfig, Name: v1alpha1.FieldRef{Path: "spec.provider"}, Format: v1alpha1.FormatNamespacedName}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gateway"}, Spec: v1alpha1.ReferenceRuleSpec{
			Target: gateway,
			SecretRefs: []v1alpha1.DataRef{{
				Name: v1alpha1.FieldRef{Path: "spec.listeners[].certSecret"},
				Key:  &v1alpha1.FieldRef{Path: "spec.listeners[].certKey", Default: "tls.crt"},
			}},
			Workloads: &v1alpha1.WorkloadRule{Kinds: []string{"Deployment"}, Selector: map[string]string{"gateway": "{name}"}},
		}},
	}
}

type fixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
	dyn dynamic.Interface
	c   client.Client
	r   *referencerules.Resolver
	// status is the StatusWriter of the Live f.live made.
	status *referencerules.StatusWriter

	mu      sync.Mutex
	changed map[string]int
}

func newFixture(t *testing.T) *fixture {
	t.Parallel()
	return newSerialFixture(t)
}

// newSerialFixture is newFixture for a test that must not run beside others
// (it creates cluster-scoped ReferenceRules).
func newSerialFixture(t *testing.T) *fixture {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, ns: env.NewNamespace(t), dyn: dynamic.NewForConfigOrDie(env.Config()), c: env.Client(), changed: map[string]int{}}
	g, err := referencerules.Compile(rules())
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config(), hc)
	if err != nil {
		t.Fatal(err)
	}
	f.r, err = referencerules.NewResolver(f.dyn, mapper, g, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	f.r.OnChange(func(ws []referencerules.WorkloadRef) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, w := range ws {
			f.changed[w.Name]++
		}
	})
	rctx, stop := context.WithCancel(ctx)
	t.Cleanup(func() { stop(); f.r.Shutdown() })
	if err := f.r.Start(rctx); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) resource(gvk v1alpha1.GroupVersionKind) dynamic.ResourceInterface {
	plural := map[string]string{"ModelConfig": "modelconfigs", "Agent": "agents", "ModelProvider": "modelproviders", "Gateway": "gateways"}[gvk.Kind]
	return f.dyn.Resource(schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: plural}).Namespace(f.ns)
}

func (f *fixture) create(gvk v1alpha1.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk.GVK())
	u.SetName(name)
	out, err := f.resource(gvk).Create(f.ctx, u, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// deployment creates a Deployment, controlled by owner when not nil.
func (f *fixture) deployment(name string, owner *unstructured.Unstructured, labels map[string]string) {
	f.t.Helper()
	sel := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.dev/agent"}}},
			},
		},
	}
	if owner != nil {
		d.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
	}
	if err := f.c.Create(f.ctx, d); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) eventually(what string, cond func() string) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("%s: %s", what, last)
}

func names(ws []referencerules.WorkloadRef) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.Kind+"/"+w.Name)
	}
	return out
}

func (f *fixture) wantWorkloads(secret string, want ...string) {
	f.t.Helper()
	if want == nil {
		want = []string{}
	}
	f.eventually("workloads of Secret "+secret, func() string {
		if got := names(f.r.WorkloadsOf(rollout.KindSecret, f.ns, secret)); !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	})
}

// refsString renders a workload's consumed refs compactly: "Secret/ca-a[ca.crt]".
func refsString(c *referencerules.Consumption, ns string) []string {
	out := []string{}
	if c == nil {
		return out
	}
	for _, r := range c.Refs[ns] {
		s := string(r.Kind) + "/" + r.Name
		if r.All {
			s += "[*]"
		}
		for _, k := range r.Keys {
			s += "[" + k.Key + "]"
		}
		out = append(out, s)
	}
	return out
}

func (f *fixture) wantConsumed(deployment string, want ...string) *referencerules.Consumption {
	f.t.Helper()
	if want == nil {
		want = []string{}
	}
	var c *referencerules.Consumption
	f.eventually("consumption of Deployment "+deployment, func() string {
		var err error
		c, err = f.r.Consumed("Deployment", f.ns, deployment)
		if err != nil {
			return err.Error()
		}
		if got := refsString(c, f.ns); !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	})
	return c
}

func (f *fixture) kagent() {
	f.create(modelConfig, "mc-a", map[string]any{"apiKeySecret": "api", "tls": map[string]any{"caCertSecretRef": "ca-a"}})
	f.create(modelConfig, "mc-b", map[string]any{"tls": map[string]any{"caCertSecretRef": "ca-b", "caCertSecretKey": "bundle.pem"}})
	f.create(modelConfig, "default-model-config", map[string]any{"provider": f.ns + "/prov"})
	f.create(modelProvider, "prov", map[string]any{"secretRef": map[string]any{"name": "prov-secret", "key": "token"}})
	for name, mc := range map[string]string{"a1": "mc-a", "a2": "mc-a", "b1": "mc-b", "d": ""} {
		spec := map[string]any{}
		if mc != "" {
			spec["declarative"] = map[string]any{"modelConfig": mc}
		}
		f.deployment(name, f.create(agent, name, spec), nil)
	}
}

func TestSecretToWorkloadsThroughCustomResources(t *testing.T) {
	f := newFixture(t)
	f.kagent()
	f.wantWorkloads("ca-a", "Deployment/a1", "Deployment/a2")
	f.wantWorkloads("api", "Deployment/a1", "Deployment/a2")
	f.wantWorkloads("ca-b", "Deployment/b1")
	// Three hops: Secret → ModelProvider → default ModelConfig → Agent d.
	f.wantWorkloads("prov-secret", "Deployment/d")
	f.wantWorkloads("unrelated")
	if !f.r.Referenced(rollout.KindSecret, f.ns, "ca-a") || f.r.Referenced(rollout.KindSecret, f.ns, "unrelated") || f.r.Referenced(rollout.KindConfigMap, f.ns, "ca-a") {
		t.Error("Referenced: want true for ca-a only")
	}

	c := f.wantConsumed("a1", "Secret/api[api-key]", "Secret/ca-a[ca.crt]")
	if !reflect.DeepEqual(c.Via, []string{"kagent.dev/Agent " + f.ns + "/a1"}) || len(c.Missing) != 0 {
		t.Errorf("a1: via %v, missing %v", c.Via, c.Missing)
	}
	if r, _ := c.Refs[f.ns].Find(rollout.KindSecret, "ca-a"); !slices.Equal(r.Uses, []string{"Agent a1 → ModelConfig mc-a"}) {
		t.Errorf("uses of ca-a: %v", r.Uses)
	}
	f.wantConsumed("b1", "Secret/ca-b[bundle.pem]")
	f.wantConsumed("d", "Secret/prov-secret[token]")
}

// Pointing an Agent at another ModelConfig changes what its Deployment
// consumes, and notifies the Deployment; a deleted ModelConfig is reported
// missing.
func TestRepointAndDeleteAreFollowed(t *testing.T) {
	f := newFixture(t)
	f.kagent()
	f.wantConsumed("a1", "Secret/api[api-key]", "Secret/ca-a[ca.crt]")

	a1, err := f.resource(agent).Get(f.ctx, "a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(a1.Object, "mc-b", "spec", "declarative", "modelConfig")
	f.mu.Lock()
	before := f.changed["a1"]
	f.mu.Unlock()
	if _, err := f.resource(agent).Update(f.ctx, a1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.wantConsumed("a1", "Secret/ca-b[bundle.pem]")
	f.wantWorkloads("ca-a", "Deployment/a2")
	f.wantWorkloads("ca-b", "Deployment/a1", "Deployment/b1")
	f.eventually("a1 notified", func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.changed["a1"] <= before {
			return "no change notified for a1"
		}
		return ""
	})

	if err := f.resource(modelConfig).Delete(f.ctx, "mc-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := f.wantConsumed("b1")
	if len(c.Missing) != 1 || c.Missing[0].Kind != "kagent.dev/ModelConfig" || c.Missing[0].Name != f.ns+"/mc-b" {
		t.Fatalf("missing: %v", c.Missing)
	}
	t.Logf("missing: %s", c.Missing[0].Detail)
}

// A Gateway lists Secrets in listeners (name and key read from the same list
// element) and runs the Deployments its label selects.
func TestListsAndLabelSelectedWorkloads(t *testing.T) {
	f := newFixture(t)
	f.create(gateway, "gw1", map[string]any{"listeners": []any{
		map[string]any{"certSecret": "gw-cert"},
		map[string]any{"certSecret": "gw-alt", "certKey": "alt.pem"},
	}})
	f.deployment("gw1-proxy", nil, map[string]string{"gateway": "gw1"})
	f.deployment("other", nil, map[string]string{"gateway": "gw2"})
	f.wantWorkloads("gw-cert", "Deployment/gw1-proxy")
	f.wantConsumed("gw1-proxy", "Secret/gw-alt[alt.pem]", "Secret/gw-cert[tls.crt]")
	f.wantConsumed("other")
}

// The hash of what a chain consumes changes with a consumed key only.
func TestOnlyConsumedKeysAreHashed(t *testing.T) {
	f := newFixture(t)
	f.kagent()
	ca := hotcerttest.MustNewCA().CertPEM
	cs := env.Clientset().CoreV1().Secrets(f.ns)
	for name, data := range map[string]map[string][]byte{
		"api":  {"api-key": []byte("k1"), "other": []byte("o")},
		"ca-a": {"ca.crt": ca, "notes": []byte("n1")},
	} {
		if _, err := cs.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := f.wantConsumed("a2", "Secret/api[api-key]", "Secret/ca-a[ca.crt]")
	hash := func() string {
		cfg, err := rollout.Compute(f.ns, c.Refs[f.ns], func(kind rollout.Kind, name string) (*rollout.Object, error) {
			s, err := cs.Get(f.ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return rollout.SecretObject(s, time.Now()), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(cfg.Missing)+len(cfg.Invalid) > 0 {
			t.Fatalf("problems: %v %v", cfg.Missing, cfg.Invalid)
		}
		return cfg.Hash
	}
	update := func(name, key string, v []byte) {
		s, err := cs.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[key] = v
		if _, err := cs.Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h0 := hash()
	update("ca-a", "notes", []byte("n2"))
	update("api", "other", []byte("o2"))
	if h := hash(); h != h0 {
		t.Fatalf("an unconsumed key changed the hash")
	}
	update("ca-a", "ca.crt", hotcerttest.MustNewCA().CertPEM)
	if h := hash(); h == h0 {
		t.Fatalf("the consumed CA changed, the hash did not")
	}
}
