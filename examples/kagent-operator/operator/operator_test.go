package operator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert/examples/kagent-operator/api/v1alpha2"
	"github.com/hotcert/hotcert/examples/kagent-operator/operator"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
)

// env is a real etcd, kube-apiserver and kube-controller-manager (Deployments
// get ReplicaSets: a rollout is a new ReplicaSet), with the example's CRDs.
var env *kubetest.Env

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha2.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	kubetest.Main(m, &env, kubetest.WithControllerManager(), kubetest.WithScheme(scheme()),
		kubetest.WithCRDPaths("../config/crd"))
}

const (
	pollTimeout = 30 * time.Second
	// quiet is how long "nothing happens" is watched for.
	quiet = 3 * time.Second
)

// startOperator runs the example operator in its own manager, scoped to ns.
func startOperator(t *testing.T, ns string) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config(), ctrl.Options{
		Scheme:     env.Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&operator.Reconciler{}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

type fixture struct {
	t   *testing.T
	ns  string
	c   client.Client
	ctx context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	f := &fixture{t: t, ns: env.NewNamespace(t), c: env.Client(), ctx: ctx}
	startOperator(t, f.ns)
	return f
}

func caPEM() []byte { return hotcerttest.MustNewCA().CertPEM }

func (f *fixture) secret(name string, data map[string][]byte) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Data: data}
	if err := f.c.Create(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) updateSecret(name string, mutate func(map[string][]byte)) {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, s); err != nil {
		f.t.Fatal(err)
	}
	mutate(s.Data)
	if err := f.c.Update(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) modelConfig(name, apiKeySecret, caSecret string) {
	f.t.Helper()
	mc := &v1alpha2.ModelConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1alpha2.ModelConfigSpec{Model: "gpt-x", APIKeySecret: apiKeySecret}}
	if caSecret != "" {
		mc.Spec.TLS = &v1alpha2.TLSConfig{CACertSecretRef: caSecret}
	}
	if err := f.c.Create(f.ctx, mc); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) agent(name, modelConfig string) {
	f.t.Helper()
	a := &v1alpha2.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
	if modelConfig != "" {
		a.Spec.Declarative = &v1alpha2.DeclarativeAgentSpec{ModelConfig: modelConfig}
	}
	if err := f.c.Create(f.ctx, a); err != nil {
		f.t.Fatal(err)
	}
}

// replicaSets counts the ReplicaSets of the Deployment name: one per pod
// template it ever had, so one more per rollout.
func (f *fixture) replicaSets(name string) int {
	f.t.Helper()
	list := &appsv1.ReplicaSetList{}
	if err := f.c.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	n := 0
	for _, rs := range list.Items {
		for _, o := range rs.OwnerReferences {
			if o.Kind == "Deployment" && o.Name == name {
				n++
			}
		}
	}
	return n
}

func (f *fixture) deployment(name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, d); err != nil {
		return nil
	}
	return d
}

// eventually polls cond until it returns "" (success) or the timeout passes.
func (f *fixture) eventually(what string, cond func() string) {
	f.t.Helper()
	deadline := time.Now().Add(pollTimeout)
	last := ""
	for time.Now().Before(deadline) {
		if last = cond(); last == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Fatalf("%s: %s", what, last)
}

// waitRS waits until each Deployment has exactly want[name] ReplicaSets.
func (f *fixture) waitRS(want map[string]int) {
	f.t.Helper()
	f.eventually(fmt.Sprint("ReplicaSets ", want), func() string {
		for name, n := range want {
			if got := f.replicaSets(name); got != n {
				return fmt.Sprintf("Deployment %s has %d ReplicaSets, want %d", name, got, n)
			}
		}
		return ""
	})
}

// steadyRS checks that the ReplicaSet counts stay at want for a while.
func (f *fixture) steadyRS(want map[string]int) {
	f.t.Helper()
	f.waitRS(want)
	deadline := time.Now().Add(quiet)
	for time.Now().Before(deadline) {
		for name, n := range want {
			if got := f.replicaSets(name); got != n {
				f.t.Fatalf("Deployment %s has %d ReplicaSets, want %d (a rollout that should not happen)", name, got, n)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// event waits for an Event of reason on the Agent name whose message holds
// substr.
func (f *fixture) event(agent, reason, substr string) {
	f.t.Helper()
	f.eventually("Event "+reason+" on Agent "+agent, func() string {
		list, err := env.Clientset().CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Agent" && e.InvolvedObject.Name == agent {
				if e.Reason == reason && strings.Contains(e.Message, substr) {
					return ""
				}
				seen = append(seen, e.Reason+": "+e.Message)
			}
		}
		return fmt.Sprintf("not seen; events: %q", seen)
	})
}

func hashOf(d *appsv1.Deployment) string {
	if d == nil {
		return ""
	}
	return rollout.Stamped(&d.Spec.Template)
}

// Rotating the CA Secret rolls exactly the Agents whose ModelConfig names it;
// rotating a key the ModelConfig does not consume rolls nothing.
func TestRotateCARollsExactlyItsAgents(t *testing.T) {
	f := newFixture(t)
	f.secret("api", map[string][]byte{"api-key": []byte("k1"), "unused": []byte("u")})
	f.secret("ca-a", map[string][]byte{"ca.crt": caPEM(), "notes": []byte("v1")})
	f.secret("ca-b", map[string][]byte{"ca.crt": caPEM()})
	f.modelConfig("mc-a", "api", "ca-a")
	f.modelConfig("mc-b", "api", "ca-b")
	f.modelConfig(v1alpha2.DefaultModelConfig, "", "ca-b")
	f.agent("a1", "mc-a")
	f.agent("a2", "mc-a")
	f.agent("b1", "mc-b")
	f.agent("d", "") // default-model-config
	f.waitRS(map[string]int{"a1": 1, "a2": 1, "b1": 1, "d": 1})
	if hashOf(f.deployment("a1")) == "" || hashOf(f.deployment("a1")) != hashOf(f.deployment("a2")) {
		t.Fatalf("a1 and a2 consume the same keys: hashes %q and %q", hashOf(f.deployment("a1")), hashOf(f.deployment("a2")))
	}

	f.updateSecret("ca-a", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"a1": 2, "a2": 2, "b1": 1, "d": 1})
	f.event("a1", operator.EventRolledOut, "rolling Deployment a1")

	// Keys nobody consumes: the CA Secret's "notes", the API Secret's "unused".
	f.updateSecret("ca-a", func(d map[string][]byte) { d["notes"] = []byte("v2") })
	f.updateSecret("api", func(d map[string][]byte) { d["unused"] = []byte("u2"); d["added"] = []byte("x") })
	f.steadyRS(map[string]int{"a1": 2, "a2": 2, "b1": 1, "d": 1})

	// The API key is consumed by every Agent.
	f.updateSecret("api", func(d map[string][]byte) { d["api-key"] = []byte("k2") })
	f.steadyRS(map[string]int{"a1": 3, "a2": 3, "b1": 2, "d": 1})

	// The default ModelConfig's CA.
	f.updateSecret("ca-b", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"a1": 3, "a2": 3, "b1": 3, "d": 2})
}

// Pointing an Agent at another ModelConfig re-hashes it, and it then follows
// the new ModelConfig's Secrets only.
func TestRepointedAgentFollowsItsNewModelConfig(t *testing.T) {
	f := newFixture(t)
	f.secret("ca-a", map[string][]byte{"ca.crt": caPEM()})
	f.secret("ca-b", map[string][]byte{"ca.crt": caPEM()})
	f.modelConfig("mc-a", "", "ca-a")
	f.modelConfig("mc-b", "", "ca-b")
	f.agent("x", "mc-a")
	f.waitRS(map[string]int{"x": 1})
	before := hashOf(f.deployment("x"))

	a := &v1alpha2.Agent{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "x"}, a); err != nil {
		t.Fatal(err)
	}
	a.Spec.Declarative.ModelConfig = "mc-b"
	if err := f.c.Update(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	f.steadyRS(map[string]int{"x": 2})
	if after := hashOf(f.deployment("x")); after == before || after == "" {
		t.Fatalf("hash %q after repointing, %q before", after, before)
	}

	f.updateSecret("ca-a", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"x": 2})
	f.updateSecret("ca-b", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"x": 3})
}

// Two ModelConfigs sharing one Secret (one through its CA reference, the other
// through both its API key and its CA references) both follow it.
func TestModelConfigsSharingASecretBothFollow(t *testing.T) {
	f := newFixture(t)
	f.secret("shared", map[string][]byte{"ca.crt": caPEM(), "api-key": []byte("k1")})
	f.modelConfig("mc-1", "", "shared")
	f.modelConfig("mc-2", "shared", "shared")
	f.agent("one", "mc-1")
	f.agent("two", "mc-2")
	f.waitRS(map[string]int{"one": 1, "two": 1})

	f.updateSecret("shared", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"one": 2, "two": 2})
	// Only mc-2 consumes the API key.
	f.updateSecret("shared", func(d map[string][]byte) { d["api-key"] = []byte("k2") })
	f.steadyRS(map[string]int{"one": 2, "two": 3})
}

// A deleted Secret or ModelConfig rolls nothing (the running pods keep what
// they mounted) and says so in an Event; once back, the Agent follows again.
func TestDeletedSecretOrModelConfigRollsNothing(t *testing.T) {
	f := newFixture(t)
	f.secret("ca", map[string][]byte{"ca.crt": caPEM()})
	f.modelConfig("mc", "", "ca")
	f.agent("x", "mc")
	f.waitRS(map[string]int{"x": 1})
	before := hashOf(f.deployment("x"))

	if err := f.c.Delete(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	f.event("x", operator.EventMissingSecret, "Secret ca not found")
	f.steadyRS(map[string]int{"x": 1})
	if h := hashOf(f.deployment("x")); h != before {
		t.Fatalf("hash changed to %q with the Secret deleted", h)
	}

	// Recreated with other content: that is a change, and it rolls.
	f.secret("ca", map[string][]byte{"ca.crt": caPEM()})
	f.steadyRS(map[string]int{"x": 2})

	if err := f.c.Delete(f.ctx, &v1alpha2.ModelConfig{ObjectMeta: metav1.ObjectMeta{Name: "mc", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	f.event("x", operator.EventModelConfigNotFound, "ModelConfig mc not found")
	f.updateSecret("ca", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"x": 2})
	if f.deployment("x") == nil {
		t.Fatal("Deployment deleted with its ModelConfig")
	}
}

// The operator rewrites the whole pod template, annotations included, on every
// reconcile (as kagent's does): because it computes the stamp itself, nothing
// else writes the template and repeated reconciles never roll (no ping-pong).
func TestOwnerRewritingTheTemplateNeverPingPongs(t *testing.T) {
	f := newFixture(t)
	f.secret("ca", map[string][]byte{"ca.crt": caPEM()})
	f.modelConfig("mc", "", "ca")
	f.agent("x", "mc")
	f.waitRS(map[string]int{"x": 1})
	gen := f.deployment("x").Generation

	// Each metadata change of the Agent is a reconcile.
	for i := range 20 {
		a := &v1alpha2.Agent{}
		if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "x"}, a); err != nil {
			t.Fatal(err)
		}
		metav1.SetMetaDataAnnotation(&a.ObjectMeta, "poke", fmt.Sprint(i))
		if err := f.c.Update(f.ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	f.updateSecret("ca", func(d map[string][]byte) { d["ca.crt"] = caPEM() })
	f.steadyRS(map[string]int{"x": 2})
	if g := f.deployment("x").Generation; g != gen+1 {
		t.Fatalf("Deployment generation %d, want %d: the template was written more than once", g, gen+1)
	}
}
