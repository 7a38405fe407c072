package controller

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
)

var (
	agents         = schema.GroupVersionResource{Group: "kagent.dev", Version: "v1alpha2", Resource: "agents"}
	modelConfigs   = schema.GroupVersionResource{Group: "kagent.dev", Version: "v1alpha2", Resource: "modelconfigs"}
	modelProviders = schema.GroupVersionResource{Group: "kagent.dev", Version: "v1alpha2", Resource: "modelproviders"}
	referenceRules = schema.GroupVersionResource{Group: "hotcert.dev", Version: "v1alpha1", Resource: "referencerules"}
)

var kagentRulesOnce sync.Once

// kagentRules creates, once per test binary, the ReferenceRules of
// examples/kagent-referencerules (the documented ones, as they are), and one
// for a ModelProvider that a ModelConfig names in "namespace/name" form (a
// third hop, which can lead to another namespace). Rules are cluster-scoped,
// one per kind, so they stay for every test of the binary.
func kagentRules(t testing.TB) {
	t.Helper()
	kagentRulesOnce.Do(func() {
		data, err := os.ReadFile("../../examples/kagent-referencerules/referencerules.yaml")
		if err != nil {
			t.Fatal(err)
		}
		objs := kubetest.DecodeYAML(t, data)
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "hotcert.dev/v1alpha1", "kind": "ReferenceRule",
			"metadata": map[string]any{"name": "test-kagent-modelprovider"},
			"spec": map[string]any{
				"target":     map[string]any{"group": "kagent.dev", "version": "v1alpha2", "kind": "ModelProvider"},
				"secretRefs": []any{map[string]any{"name": map[string]any{"path": "spec.secretRef.name"}, "key": map[string]any{"path": "spec.secretRef.key"}}},
				"referencedBy": []any{map[string]any{
					"target": map[string]any{"group": "kagent.dev", "version": "v1alpha2", "kind": "ModelConfig"},
					"name":   map[string]any{"path": "spec.provider"}, "format": "NamespacedName",
				}},
			},
		}})
		for _, o := range objs {
			if _, err := dyn(t).Resource(referenceRules).Create(context.Background(), o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating ReferenceRule %s: %v", o.GetName(), err)
			}
		}
	})
}

func dyn(t testing.TB) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// createCR creates a kagent.dev custom resource.
func createCR(t testing.TB, gvr schema.GroupVersionResource, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvr.GroupVersion().String(), "kind": kind, "spec": spec}}
	u.SetNamespace(ns)
	u.SetName(name)
	out, err := dyn(t).Resource(gvr).Namespace(ns).Create(testContext(t), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s: %v", kind, name, err)
	}
	return out
}

// agentDeployment creates an Agent naming modelConfig ("" for kagent's
// default) and the Deployment it controls, as kagent's operator does: no
// hotcert annotation on it.
func agentDeployment(t testing.TB, ns, name, modelConfig string, spec corev1.PodSpec) {
	t.Helper()
	as := map[string]any{}
	if modelConfig != "" {
		as["declarative"] = map[string]any{"modelConfig": modelConfig}
	}
	a := createCR(t, agents, "Agent", ns, name, as)
	d := deployment(ns, name, 0, spec, nil)
	d.OwnerReferences = []metav1.OwnerReference{{APIVersion: a.GetAPIVersion(), Kind: "Agent", Name: name, UID: a.GetUID(), Controller: ptr.To(true)}}
	create(t, d)
}

func repoint(t testing.TB, ns, agent, modelConfig string) {
	t.Helper()
	ctx := testContext(t)
	a, err := dyn(t).Resource(agents).Namespace(ns).Get(ctx, agent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(a.Object, modelConfig, "spec", "declarative", "modelConfig"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn(t).Resource(agents).Namespace(ns).Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rolloutsAre waits until each Deployment has want[name] rollouts (ReplicaSets
// beyond the first), then checks that no other rollout follows for a while.
func rolloutsAre(t testing.TB, ns string, want map[string]int) {
	t.Helper()
	check := func() (bool, error) {
		for name, n := range want {
			if replicaSets(t, ns, name) != n+1 {
				return false, nil
			}
		}
		return true, nil
	}
	waitFor(t, "rollouts "+describeWant(want), check)
	holds(t, 1500*time.Millisecond, "rollouts "+describeWant(want), check)
}

func describeWant(want map[string]int) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		parts = append(parts, fmt.Sprintf("%s:%d", name, want[name]))
	}
	return strings.Join(parts, " ")
}

// TestReferenceRulesRollAgents is the kagent case through `hotcert
// controller`, with the documented ReferenceRules and no hotcert annotation on
// any Deployment: rotating the CA Secret rolls exactly the Agents whose
// ModelConfig names it (two ModelConfigs share it: both follow); a key the
// ModelConfig does not consume rolls nothing; an Agent pointed at another
// ModelConfig is re-hashed (a new baseline, not a restart) and follows the new
// one; a truncated CA, a deleted ModelConfig or Secret roll nothing and say
// why in an Event and a metric; the next good write rolls.
func TestReferenceRulesRollAgents(t *testing.T) {
	t.Parallel()
	kagentRules(t)
	ns := env.NewNamespace(t)
	ca := func() string { return string(hotcerttest.MustNewCA().CertPEM) }
	createSecret(t, secret(ns, "api", map[string]string{"api-key": "k1", "unused": "u1"}))
	createSecret(t, secret(ns, "ca-a", map[string]string{"ca.crt": ca(), "notes": "n1"}))
	createSecret(t, secret(ns, "ca-b", map[string]string{"bundle.pem": ca()}))
	createCR(t, modelConfigs, "ModelConfig", ns, "mc-a", map[string]any{"apiKeySecret": "api", "apiKeySecretKey": "api-key", "tls": map[string]any{"caCertSecretRef": "ca-a"}})
	createCR(t, modelConfigs, "ModelConfig", ns, "mc-b", map[string]any{"tls": map[string]any{"caCertSecretRef": "ca-b", "caCertSecretKey": "bundle.pem"}})
	createCR(t, modelConfigs, "ModelConfig", ns, "default-model-config", map[string]any{"tls": map[string]any{"caCertSecretRef": "ca-a"}})
	// a1 also reads the API key through its pod spec, as kagent injects it:
	// the two references merge.
	agentDeployment(t, ns, "a1", "mc-a", envFrom("api", "api-key"))
	agentDeployment(t, ns, "a2", "mc-a", envFrom("none"))
	agentDeployment(t, ns, "b1", "mc-b", envFrom("none"))
	agentDeployment(t, ns, "c1", "", envFrom("none")) // default-model-config, which shares ca-a
	for _, n := range []string{"a1", "a2", "b1", "c1"} {
		waitReplicaSets(t, ns, n, 1)
	}
	o := testOptions()
	o.ReferenceRules = true
	c := startController(t, ns, o)

	for _, n := range []string{"a1", "a2", "b1", "c1"} {
		waitAdopted(t, ns, n)
		waitEvent(t, ns, n, eventAdopted, "nothing restarted")
	}
	// The rules say they are followed (kubectl get referencerules: READY True).
	for _, name := range []string{"kagent-modelconfig", "kagent-agent"} {
		waitFor(t, "ReferenceRule "+name+" Ready", func() (bool, error) {
			u, err := dyn(t).Resource(referenceRules).Get(testContext(t), name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
	}
	rolloutsAre(t, ns, map[string]int{"a1": 0, "a2": 0, "b1": 0, "c1": 0})

	updateSecret(t, ns, "ca-a", setKey("ca.crt", ca()))
	rolloutsAre(t, ns, map[string]int{"a1": 1, "a2": 1, "b1": 0, "c1": 1})
	waitEvent(t, ns, "c1", eventRolled, "Secret ca-a key ca.crt changed")

	// Keys no chain consumes.
	notes := updateSecret(t, ns, "ca-a", setKey("notes", "n2"))
	unused := updateSecret(t, ns, "api", setKey("unused", "u2"))
	waitFor(t, "the controller reading the unconsumed changes", func() (bool, error) {
		return c.digested(rollout.KindSecret, "ca-a", notes.ResourceVersion) && c.digested(rollout.KindSecret, "api", unused.ResourceVersion), nil
	})
	rolloutsAre(t, ns, map[string]int{"a1": 1, "a2": 1, "b1": 0, "c1": 1})
	// The API key, consumed by a1 through both its pod spec and mc-a.
	updateSecret(t, ns, "api", setKey("api-key", "k2"))
	rolloutsAre(t, ns, map[string]int{"a1": 2, "a2": 2, "b1": 0, "c1": 1})

	// A truncated CA: refused with a reason, nothing rolls; the next good
	// write rolls.
	updateSecret(t, ns, "ca-a", setKey("ca.crt", ca()[:120]))
	waitEvent(t, ns, "a2", eventRefused, "ca.crt")
	rolloutsAre(t, ns, map[string]int{"a1": 2, "a2": 2, "b1": 0, "c1": 1})
	if got := c.counter("Deployment", resultRefused, reason(rollout.ReasonInvalidTLS)); got < 3 {
		t.Fatalf("invalid TLS refusals: %d, want one for each of a1, a2, c1", got)
	}
	updateSecret(t, ns, "ca-a", setKey("ca.crt", ca()))
	rolloutsAre(t, ns, map[string]int{"a1": 3, "a2": 3, "b1": 0, "c1": 2})

	// a1 now uses mc-b: re-hashed, a new baseline, no restart; it follows
	// ca-b, no longer ca-a.
	repoint(t, ns, "a1", "mc-b")
	waitEvent(t, ns, "a1", eventRebased, "Secret ca-b")
	rolloutsAre(t, ns, map[string]int{"a1": 3})
	updateSecret(t, ns, "ca-b", setKey("bundle.pem", ca()))
	rolloutsAre(t, ns, map[string]int{"a1": 4, "a2": 3, "b1": 1, "c1": 2})
	updateSecret(t, ns, "ca-a", setKey("ca.crt", ca()))
	rolloutsAre(t, ns, map[string]int{"a1": 4, "a2": 4, "b1": 1, "c1": 3})

	// mc-b deleted: a1 and b1 keep running what they run.
	if err := dyn(t).Resource(modelConfigs).Namespace(ns).Delete(testContext(t), "mc-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "b1", eventRefused, "ModelConfig "+ns+"/mc-b, named by Agent b1, not found")
	updateSecret(t, ns, "ca-b", setKey("bundle.pem", ca()))
	rolloutsAre(t, ns, map[string]int{"a1": 4, "b1": 1})

	// ca-a deleted: a2 and c1 keep running what they run.
	if err := clientset().CoreV1().Secrets(ns).Delete(testContext(t), "ca-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ns, "a2", eventRefused, "Secret ca-a not found")
	waitEvent(t, ns, "c1", eventRefused, "Secret ca-a not found")
	rolloutsAre(t, ns, map[string]int{"a2": 4, "c1": 3})
	if got := c.counter("Deployment", resultRefused, reason(rollout.ReasonMissingObject)); got < 4 {
		t.Fatalf("refusals counted: %d, want one for each of a1, b1, a2, c1", got)
	}

	// The Secret back: the next rotation rolls again.
	createSecret(t, secret(ns, "ca-a", map[string]string{"ca.crt": ca(), "notes": "n1"}))
	rolloutsAre(t, ns, map[string]int{"a2": 5, "c1": 4})
}

// TestReferenceRuleChainAcrossNamespaces: a ModelConfig names its provider as
// "namespace/name" in another namespace, whose Secret it consumes. A
// controller watching both namespaces, with a hash key, rolls the Agent when
// that Secret changes. One that does not watch the provider's namespace
// refuses, saying which object is out of its scope, instead of never seeing
// it change: the ModelProvider when its informers are scoped to the Agent's
// namespace alone, the Secret when it watches several namespaces (its
// informers see all). Without a hash key it refuses too: plain digests of
// another namespace's values must not land on this namespace's workloads.
func TestReferenceRuleChainAcrossNamespaces(t *testing.T) {
	t.Parallel()
	kagentRules(t)
	ns, shared, third := env.NewNamespace(t), env.NewNamespace(t), env.NewNamespace(t)
	createSecret(t, secret(shared, "token", map[string]string{"token": "t1", "other": "o1"}))
	createCR(t, modelProviders, "ModelProvider", shared, "prov", map[string]any{"secretRef": map[string]any{"name": "token", "key": "token"}})
	createCR(t, modelConfigs, "ModelConfig", ns, "mc", map[string]any{"provider": shared + "/prov"})
	agentDeployment(t, ns, "a", "mc", envFrom("none"))
	waitReplicaSets(t, ns, "a", 1)

	o := testOptions()
	o.ReferenceRules = true
	narrow := startController(t, ns, o)
	waitEvent(t, ns, "a", eventRefused, "ModelProvider "+shared+"/prov, named by Agent a → ModelConfig mc, is in a namespace this controller does not watch")
	narrow.Stop()
	wider := startControllerIn(t, env.Config(), []string{ns, third}, o)
	waitEvent(t, ns, "a", eventRefused, "Secret "+shared+"/token (named by Agent a → ModelConfig mc → ModelProvider prov) is in a namespace this controller does not watch")
	if got := wider.counter("Deployment", resultRefused, reason(rollout.ReasonOutOfScope)); got != 1 {
		t.Fatalf("out-of-scope refusals: %d, want 1", got)
	}
	wider.Stop()
	// Both namespaces watched, but no hash key: plain digests of the other
	// namespace's values would land on this namespace's Deployment.
	unkeyed := startControllerIn(t, env.Config(), []string{ns, shared}, o)
	waitEvent(t, ns, "a", eventRefused, "is in another namespace: following it needs a hash key (--hash-key-file)")
	if got := unkeyed.counter("Deployment", resultRefused, reason(rollout.ReasonCrossNamespace)); got != 1 {
		t.Fatalf("cross-namespace refusals: %d, want 1", got)
	}
	unkeyed.Stop()

	o.HashKey = []byte("a hash key of the test, 32 bytes")
	c := startControllerIn(t, env.Config(), []string{ns, shared}, o)
	waitAdopted(t, ns, "a")
	other := updateSecret(t, shared, "token", setKey("other", "o2"))
	waitFor(t, "the controller reading the unconsumed change", func() (bool, error) {
		c.seenMu.Lock()
		defer c.seenMu.Unlock()
		return c.seen[clusterview.Key{Kind: rollout.KindSecret, Namespace: shared, Name: "token"}][other.ResourceVersion], nil
	})
	waitEvent(t, ns, "a", eventAdopted, "Secret "+shared+"/token as the baseline")
	rolloutsAre(t, ns, map[string]int{"a": 0})
	updateSecret(t, shared, "token", setKey("token", "t2"))
	rolloutsAre(t, ns, map[string]int{"a": 1})
	waitEvent(t, ns, "a", eventRolled, "Secret "+shared+"/token key token changed")
}

// Without the ReferenceRule CRD (a cluster where it was not installed), the
// controller with --reference-rules on still rolls opted-in workloads.
func TestReferenceRulesWithoutTheCRD(t *testing.T) {
	t.Parallel()
	// A control plane of its own, with no CRD installed.
	bare := kubetest.Start(t, kubetest.WithControllerManager())
	cs := bare.Clientset()
	ctx := testContext(t)
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bare-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns.Name).Create(ctx, secret(ns.Name, "s", map[string]string{"a": "1"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns.Name).Create(ctx, deployment(ns.Name, "app", 0, envFrom("s", "a"), optIn), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.ReferenceRules = true
	startControllerWith(t, bare.Config(), ns.Name, o)
	waitFor(t, "adoption", func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns.Name).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Annotations[rollout.AnnotationAppliedHash] != "", err
	})
	s, err := cs.CoreV1().Secrets(ns.Name).Get(ctx, "s", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data["a"] = []byte("2")
	if _, err := cs.CoreV1().Secrets(ns.Name).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rollout", func() (bool, error) {
		d, err := cs.AppsV1().Deployments(ns.Name).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && rollout.Stamped(&d.Spec.Template) != "", err
	})
}
