package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/chain"
)

// chainReconciler is the smallest Deployment reconciler wired the way the
// rollout controller is to be (see the package doc and the report of this
// change): chain references merged with pod-spec ones, hashed with
// rollout.Compute, never rolled into a broken chain, adopted without a
// rollout, stamped with rollout.Stamp. It has none of the controller's rate
// control; it shows the adapters hold together on a real API server.
type chainReconciler struct {
	c      client.Client
	api    client.Reader
	live   *chain.Live
	events record.EventRecorder
}

func (r *chainReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := r.c.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cons, err := r.live.Consumed("Deployment", d.Namespace, d.Name)
	if err != nil || cons == nil {
		return reconcile.Result{}, err
	}
	if len(cons.Missing) > 0 {
		r.events.Eventf(d, corev1.EventTypeWarning, "ChainBroken", "%s; not rolling", cons.Missing[0].Detail)
		return reconcile.Result{}, nil
	}
	refs := chain.MergeRefs(rollout.PodSpecRefs(&d.Spec.Template.Spec), cons.Refs[d.Namespace])
	cfg, err := rollout.Compute(d.Namespace, refs, func(kind rollout.Kind, name string) (*rollout.Object, error) {
		s := &corev1.Secret{}
		if err := r.api.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, nil
			}
			return nil, err
		}
		return rollout.SecretObject(s, time.Now()), nil
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(cfg.Missing) > 0 {
		r.events.Eventf(d, corev1.EventTypeWarning, "Missing", "%s; not rolling", cfg.Missing[0])
		return reconcile.Result{}, nil
	}
	state := rollout.StateOf(d.Annotations)
	if state.AppliedHash == cfg.Hash {
		return reconcile.Result{}, nil
	}
	orig := d.DeepCopy()
	if state.Adopted() {
		rollout.Stamp(&d.Spec.Template, cfg.Hash)
		r.events.Eventf(d, corev1.EventTypeNormal, "RolledOut", "%s", rollout.Describe(state.Changes(cfg), 8))
	}
	metav1.SetMetaDataAnnotation(&d.ObjectMeta, rollout.AnnotationAppliedHash, cfg.Hash)
	return reconcile.Result{}, r.c.Patch(ctx, d, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}), client.FieldOwner(rollout.FieldManager))
}

// Through ReferenceRules alone (no operator code), rotating the CA rolls exactly
// the Deployments of the Agents whose ModelConfig names it; an unconsumed key
// rolls nothing; repointing an Agent re-hashes; a deleted ModelConfig rolls
// nothing and says so; two ModelConfigs sharing a Secret both follow.
func TestReferenceRulesDriveRollouts(t *testing.T) {
	f := newSerialFixture(t)
	for _, r := range rules()[:2] {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ReferenceRule"))
		if _, err := f.dyn.Resource(chain.ReferenceRules).Create(f.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = f.dyn.Resource(chain.ReferenceRules).Delete(context.Background(), r.Name, metav1.DeleteOptions{})
		})
	}
	secrets := env.Clientset().CoreV1().Secrets(f.ns)
	ca := func() []byte { return hotcerttest.MustNewCA().CertPEM }
	for name, data := range map[string]map[string][]byte{
		"api":  {"api-key": []byte("k1"), "unused": []byte("u1")},
		"ca-a": {"ca.crt": ca(), "notes": []byte("n1")},
		"ca-b": {"bundle.pem": ca()},
	} {
		if _, err := secrets.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// mc-c shares ca-a with mc-a.
	f.create(modelConfig, "mc-c", map[string]any{"tls": map[string]any{"caCertSecretRef": "ca-a"}})
	f.deployment("c1", f.create(agent, "c1", map[string]any{"declarative": map[string]any{"modelConfig": "mc-c"}}), nil)
	f.kagent()

	hc, err := rest.HTTPClientFor(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config(), hc)
	if err != nil {
		t.Fatal(err)
	}
	live := chain.NewLive(f.dyn, mapper, f.ns)
	mgr, err := ctrl.NewManager(env.Config(), ctrl.Options{
		Scheme:     env.Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(live); err != nil {
		t.Fatal(err)
	}
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	rec := &chainReconciler{c: mgr.GetClient(), api: mgr.GetAPIReader(), live: live, events: mgr.GetEventRecorderFor("chain-test")} //nolint:staticcheck // core/v1 Events
	if err := ctrl.NewControllerManagedBy(mgr).Named("chain-deployments").
		For(&appsv1.Deployment{}).
		WatchesMetadata(secretMeta, handler.EnqueueRequestsFromMapFunc(live.MapData(rollout.KindSecret, "Deployment")),
			builder.WithPredicates(predicate.ResourceVersionChangedPredicate{})).
		WatchesRawSource(live.Source("Deployment")).
		Complete(rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	// Count pod-template versions per Deployment from a watch: each new
	// version is a rollout. (Generation would not do: a Deployment's
	// annotation change bumps it too.)
	var tmu sync.Mutex
	templates := map[string]map[string]bool{}
	w, err := env.Clientset().AppsV1().Deployments(f.ns).Watch(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			b, _ := json.Marshal(d.Spec.Template)
			tmu.Lock()
			if templates[d.Name] == nil {
				templates[d.Name] = map[string]bool{}
			}
			templates[d.Name][string(b)] = true
			tmu.Unlock()
		}
	}()
	rolls := func(want map[string]int) {
		t.Helper()
		check := func() string {
			tmu.Lock()
			defer tmu.Unlock()
			for name, g := range want {
				if got := len(templates[name]) - 1; got != g {
					return fmt.Sprintf("Deployment %s rolled %d times, want %d", name, got, g)
				}
			}
			return ""
		}
		f.eventually(fmt.Sprint("rollouts ", want), check)
		time.Sleep(2 * time.Second)
		if msg := check(); msg != "" {
			t.Fatal(msg + " (a rollout that should not happen)")
		}
	}
	adopted := func(names ...string) {
		t.Helper()
		f.eventually("adoption", func() string {
			for _, n := range names {
				d, _ := env.Clientset().AppsV1().Deployments(f.ns).Get(f.ctx, n, metav1.GetOptions{})
				if d == nil || d.Annotations[rollout.AnnotationAppliedHash] == "" {
					return n + " not adopted"
				}
			}
			return ""
		})
	}
	update := func(name, key string, v []byte) {
		t.Helper()
		s, err := secrets.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data[key] = v
		if _, err := secrets.Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	adopted("a1", "a2", "b1", "c1")
	rolls(map[string]int{"a1": 0, "a2": 0, "b1": 0, "c1": 0}) // adoption rolls nothing

	update("ca-a", "ca.crt", ca())
	rolls(map[string]int{"a1": 1, "a2": 1, "b1": 0, "c1": 1})
	update("ca-a", "notes", []byte("n2"))
	update("api", "unused", []byte("u2"))
	rolls(map[string]int{"a1": 1, "a2": 1, "b1": 0, "c1": 1})

	a1, err := f.resource(agent).Get(f.ctx, "a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(a1.Object, "mc-b", "spec", "declarative", "modelConfig")
	if _, err := f.resource(agent).Update(f.ctx, a1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rolls(map[string]int{"a1": 2, "a2": 1, "b1": 0, "c1": 1})
	update("ca-a", "ca.crt", ca())
	rolls(map[string]int{"a1": 2, "a2": 2, "b1": 0, "c1": 2})

	if err := f.resource(modelConfig).Delete(f.ctx, "mc-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	update("ca-b", "bundle.pem", ca())
	rolls(map[string]int{"a1": 2, "b1": 0})
	f.eventually("ChainBroken Event", func() string {
		evs, err := env.Clientset().CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "b1" && e.Reason == "ChainBroken" && strings.Contains(e.Message, "ModelConfig "+f.ns+"/mc-b, named by Agent b1, not found") {
				return ""
			}
		}
		return "no ChainBroken Event on b1"
	})

	// A deleted Secret: no rollout, an Event.
	if err := secrets.Delete(f.ctx, "ca-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rolls(map[string]int{"a2": 2, "c1": 2})
	f.eventually("Missing Event", func() string {
		evs, err := env.Clientset().CoreV1().Events(f.ns).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "a2" && e.Reason == "Missing" && strings.Contains(e.Message, "Secret ca-a not found") {
				return ""
			}
		}
		return "no Missing Event on a2"
	})
}
