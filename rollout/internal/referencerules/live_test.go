package referencerules_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/internal/referencerules"
)

// Live follows ReferenceRules as they are created and deleted, keeps the last
// good graph when new rules cannot be used, and says why.
func TestLiveFollowsReferenceRules(t *testing.T) {
	f := newFixture(t)
	f.kagent()
	live := f.live(env.Config())
	var mu sync.Mutex
	notified := map[string]bool{}
	live.OnChange(func(ws []referencerules.WorkloadRef) {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range ws {
			notified[w.Name] = true
		}
	})
	var attempts atomic.Int32
	live.OnRules(func([]referencerules.RuleState) { attempts.Add(1) })
	f.run(live)

	rulesAPI := f.dyn.Resource(referencerules.ReferenceRules)
	create, ready := f.createRule, f.ready
	want := func(what string, secret string, names ...string) {
		t.Helper()
		if names == nil {
			names = []string{}
		}
		f.eventually(what, func() string {
			var got []string
			for _, w := range live.WorkloadsOf(rollout.KindSecret, f.ns, secret) {
				got = append(got, w.Kind+"/"+w.Name)
			}
			if got == nil {
				got = []string{}
			}
			if !reflect.DeepEqual(got, names) {
				return fmt.Sprintf("got %v, want %v (Err: %v)", got, names, live.Err())
			}
			return ""
		})
	}

	want("no rules", "ca-a")
	for _, r := range rules()[:3] {
		create(r)
	}
	want("kagent rules", "ca-a", "Deployment/a1", "Deployment/a2")
	// A source started after the graph reported its workloads (the
	// controller of a kind the graph declares) enqueues them at once.
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := live.Source("Deployment").Start(f.ctx, q); err != nil {
		t.Fatal(err)
	}
	queued := map[string]bool{}
	for q.Len() > 0 {
		req, _ := q.Get()
		queued[req.Name] = true
		q.Done(req)
	}
	if !queued["a1"] || !queued["a2"] || !queued["d"] {
		t.Fatalf("a source started late enqueued %v, want a1, a2 and d", queued)
	}
	want("three hops", "prov-secret", "Deployment/d")
	ready(metav1.ConditionTrue, "followed by the rollout controller", "kagent-modelconfig", "kagent-agent", "kagent-modelprovider")

	// A change that is not the rules' spec (the status written above, a
	// label) is looked at, but rebuilds nothing: the informers stay.
	before, n := live.Resolver(), attempts.Load()
	u, err := rulesAPI.Get(f.ctx, "kagent-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"team": "platform"})
	if _, err := rulesAPI.Update(f.ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("the label change looked at", func() string {
		if attempts.Load() == n {
			return "not yet"
		}
		return ""
	})
	if live.Resolver() != before {
		t.Fatal("a label change rebuilt the graph")
	}
	f.eventually("workloads notified", func() string {
		mu.Lock()
		defer mu.Unlock()
		if !notified["a1"] || !notified["d"] {
			return fmt.Sprintf("notified %v", notified)
		}
		return ""
	})
	if c, err := live.Consumed("Deployment", f.ns, "a1"); err != nil || c == nil || len(c.Refs[f.ns]) != 2 {
		t.Fatalf("Consumed(a1) = %+v, %v", c, err)
	}

	// A rule naming a kind nobody serves: set aside, the others stay in use.
	create(v1alpha1.ReferenceRule{ObjectMeta: metav1.ObjectMeta{Name: "unserved"}, Spec: v1alpha1.ReferenceRuleSpec{
		Target:     v1alpha1.GroupVersionKind{Group: "nope.example.dev", Version: "v1", Kind: "Nothing"},
		SecretRefs: []v1alpha1.DataRef{{Name: v1alpha1.FieldRef{Path: "spec.secret"}}},
	}})
	f.eventually("an error for the unserved kind", func() string {
		if live.Err() == nil {
			return "no error"
		}
		return ""
	})
	t.Logf("Err: %v", live.Err())
	ready(metav1.ConditionFalse, "nope.example.dev", "unserved")
	ready(metav1.ConditionTrue, "followed by the rollout controller", "kagent-modelconfig", "kagent-agent")
	want("previous graph kept", "ca-a", "Deployment/a1", "Deployment/a2")

	// A second rule about ModelConfig: the newer one is set aside.
	dup := rules()[0]
	dup.Name = "zz-modelconfig-again"
	dup.Spec.SecretRefs = dup.Spec.SecretRefs[:1]
	create(dup)
	ready(metav1.ConditionFalse, "kagent-modelconfig and zz-modelconfig-again are both about ModelConfig.kagent.dev: kagent-modelconfig, the older, is used", "zz-modelconfig-again")
	ready(metav1.ConditionTrue, "followed by the rollout controller", "kagent-modelconfig")
	want("the older rule kept", "ca-a", "Deployment/a1", "Deployment/a2")
	if err := rulesAPI.Delete(f.ctx, "zz-modelconfig-again", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rulesAPI.Delete(f.ctx, "unserved", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Without the Agent rule nothing runs the Agents.
	if err := rulesAPI.Delete(f.ctx, "kagent-agent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("agent rule deleted", "ca-a")
	ready(metav1.ConditionTrue, "followed by the rollout controller", "kagent-modelconfig", "kagent-modelprovider")
	f.eventually("error cleared", func() string {
		if err := live.Err(); err != nil {
			return err.Error()
		}
		return ""
	})
}

// A controller that may not list a kind some rule names (its platform team
// has not granted it yet) sets that rule aside, with its status saying so,
// and follows the others.
func TestRulesWhoseKindsCannotBeListedAreSetAside(t *testing.T) {
	defer referencerules.SetResolverSyncTimeout(2 * time.Second)()
	f := newSerialFixture(t)
	f.kagent()
	for _, r := range rules()[:3] {
		f.createRule(r)
	}
	read := []string{"get", "list", "watch"}
	cfg := env.NewRestrictedConfig(t, "chain-reader", []rbacv1.PolicyRule{
		{APIGroups: []string{"hotcert.dev"}, Resources: []string{"referencerules"}, Verbs: read},
		{APIGroups: []string{"hotcert.dev"}, Resources: []string{"referencerules/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"kagent.dev"}, Resources: []string{"agents", "modelconfigs"}, Verbs: read}, // not modelproviders
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets"}, Verbs: read},
	}, "")
	live := f.live(cfg)
	f.run(live)

	f.eventually("the kagent rules followed", func() string {
		if got := names(live.WorkloadsOf(rollout.KindSecret, f.ns, "ca-a")); !reflect.DeepEqual(got, []string{"Deployment/a1", "Deployment/a2"}) {
			return fmt.Sprintf("got %v (Err: %v)", got, live.Err())
		}
		return ""
	})
	if got := live.WorkloadsOf(rollout.KindSecret, f.ns, "prov-secret"); len(got) != 0 {
		t.Fatalf("the ModelProvider rule is followed without the right to list ModelProviders: %v", got)
	}
	f.ready(metav1.ConditionTrue, "followed by the rollout controller", "kagent-modelconfig", "kagent-agent")
	f.ready(metav1.ConditionFalse, "the informer of modelproviders.kagent.dev did not sync: may the controller list and watch it (RBAC)?", "kagent-modelprovider")
	t.Logf("Err: %v", live.Err())
}

// live returns a Live (and the StatusWriter f.run starts with it) acting
// with cfg's identity, informing in f's namespace.
func (f *fixture) live(cfg *rest.Config) *referencerules.Live {
	f.t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		f.t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	l := referencerules.NewLive(dyn, mapper, f.ns)
	f.status = referencerules.NewStatusWriter(dyn, l, logr.Discard())
	return l
}

// run starts live and its StatusWriter until the test ends.
func (f *fixture) run(live *referencerules.Live) {
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 2)
	go func() { done <- live.Start(ctx) }()
	go func() { done <- f.status.Start(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				f.t.Errorf("Start: %v", err)
			}
		}
	})
}

// createRule creates a ReferenceRule, deleted when the test ends.
func (f *fixture) createRule(r v1alpha1.ReferenceRule) {
	f.t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
	if err != nil {
		f.t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ReferenceRule"))
	rules := f.dyn.Resource(referencerules.ReferenceRules)
	if _, err := rules.Create(f.ctx, u, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = rules.Delete(context.Background(), r.Name, metav1.DeleteOptions{}) })
}

// ready waits until the named rules' Ready conditions are status, for their
// current generation, with a message containing msg.
func (f *fixture) ready(status metav1.ConditionStatus, msg string, names ...string) {
	f.t.Helper()
	f.eventually("Ready "+string(status), func() string {
		for _, n := range names {
			u, err := f.dyn.Resource(referencerules.ReferenceRules).Get(f.ctx, n, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			var r v1alpha1.ReferenceRule
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				return err.Error()
			}
			c := apimeta.FindStatusCondition(r.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != status || !strings.Contains(c.Message, msg) || c.ObservedGeneration != r.Generation {
				return fmt.Sprintf("%s: %+v", n, c)
			}
		}
		return ""
	})
}

// Without the ReferenceRule CRD, Live says so once (not at ERROR, and not
// again while it waits), is never Ready, looks for the CRD with one discovery
// request per interval instead of an informer retrying a list, and picks the
// CRD up when it is installed: the rules then apply. It stops cleanly.
func TestLiveWithoutTheCRD(t *testing.T) {
	defer referencerules.SetCRDPollInterval(200 * time.Millisecond)()
	bare := kubetest.Start(t) // a control plane of its own: no CRD installed
	cfg := rest.CopyConfig(bare.Config())
	var discovery, rulesRequests atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return kubetest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			switch {
			case strings.Contains(r.URL.Path, "referencerules"):
				rulesRequests.Add(1)
			case strings.HasPrefix(r.URL.Path, "/apis"):
				discovery.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	live := referencerules.NewLive(dynamic.NewForConfigOrDie(cfg), mapper, "",
		referencerules.WithLogger(logr.FromSlogHandler(slog.NewJSONHandler(&logs, nil))))
	var applied atomic.Bool
	live.OnRules(func(rs []referencerules.RuleState) {
		for _, r := range rs {
			if r.Name == "kagent-agent" && r.Err == nil {
				applied.Store(true)
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- live.Start(ctx) }()
	testutil.WaitFor(t, "the log line", func() bool {
		return strings.Contains(logs.String(), "the ReferenceRule CRD (referencerules.hotcert.dev) is not installed")
	})
	// Several looks later: still one line, never Ready, and no list or watch
	// of ReferenceRules tried (each would fail, and be logged).
	before := discovery.Load()
	testutil.WaitFor(t, "five more looks for the CRD", func() bool { return discovery.Load() >= before+5 })
	if live.Ready() {
		t.Fatal("Ready without ReferenceRules")
	}
	if n := rulesRequests.Load(); n != 0 {
		t.Errorf("%d requests for ReferenceRules while their CRD is not installed", n)
	}
	if n := strings.Count(logs.String(), "is not installed"); n != 1 || strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Fatalf("%d log lines (want 1), errors logged:\n%s", n, logs.String())
	}

	// Installed later: the rules apply.
	for _, path := range []string{"../../api/v1alpha1/crd/hotcert.dev_referencerules.yaml", "testdata/crds.yaml"} {
		installCRDs(t, bare, path)
	}
	rulesAPI := dynamic.NewForConfigOrDie(bare.Config()).Resource(referencerules.ReferenceRules)
	for _, r := range rules()[:2] {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{Object: u}
		obj.SetAPIVersion(v1alpha1.GroupVersion.String())
		obj.SetKind("ReferenceRule")
		testutil.WaitFor(t, "creating rule "+r.Name, func() bool {
			_, err := rulesAPI.Create(context.Background(), obj, metav1.CreateOptions{})
			return err == nil
		})
	}
	testutil.WaitFor(t, "the rules to apply", func() bool { return live.Ready() && applied.Load() })
	if !strings.Contains(logs.String(), "the ReferenceRule CRD is installed now") {
		t.Errorf("no line says the CRD was found:\n%s", logs.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return")
	}
}

// installCRDs creates the CustomResourceDefinitions of a YAML file in env.
func installCRDs(t *testing.T, env *kubetest.Env, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := dec.Decode(crd); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatal(err)
		}
		if crd.Name == "" {
			continue
		}
		if err := env.Client().Create(context.Background(), crd); err != nil {
			t.Fatal(err)
		}
	}
}
