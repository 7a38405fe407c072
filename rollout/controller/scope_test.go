package controller

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
)

// requestLog records the list and watch requests a controller sends to the
// API server: namespace, resource and label selector, as the API server
// receives them.
type requestLog struct {
	mu   sync.Mutex
	reqs []apiRequest
}

type apiRequest struct {
	verb, namespace, resource, selector string
}

func (l *requestLog) config() *rest.Config {
	rc := rest.CopyConfig(env.Config())
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return kubetest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet {
				l.add(r)
			}
			return rt.RoundTrip(r)
		})
	})
	return rc
}

func (l *requestLog) add(r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	req := apiRequest{verb: "LIST", selector: q.Get("labelSelector")}
	if q.Get("watch") == "true" {
		req.verb = "WATCH"
	}
	switch i := slices.Index(parts, "namespaces"); {
	case i >= 0 && len(parts) == i+3: // …/namespaces/NS/RESOURCE
		req.namespace, req.resource = parts[i+1], parts[i+2]
	case i >= 0 || len(parts) < 3: // a GET by name, or discovery
		return
	default: // …/RESOURCE across namespaces
		req.resource = parts[len(parts)-1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, req)
}

// of returns the requests recorded so far for resource.
func (l *requestLog) of(resource string) []apiRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []apiRequest
	for _, r := range l.reqs {
		if r.resource == resource {
			out = append(out, r)
		}
	}
	return out
}

func (l *requestLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// since returns the requests recorded after the first n.
func (l *requestLog) since(n int) []apiRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs[n:])
}

var scopedResources = []string{"secrets", "configmaps", "deployments", "statefulsets", "daemonsets"}

func labelNamespace(t testing.TB, ns, key string, value *string) {
	t.Helper()
	patch := mustJSON(map[string]any{"metadata": map[string]any{"labels": map[string]*string{key: value}}})
	if _, err := clientset().CoreV1().Namespaces().Patch(testContext(t), ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func cachedDeployments(t testing.TB, c *running, ns string) []string {
	t.Helper()
	var list appsv1.DeploymentList
	if err := c.mgr.GetCache().List(testContext(t), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list.Items {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	return names
}

// TestNamespaceSelector: under a namespace selector the controller sends no
// list or watch of Secrets, ConfigMaps or workloads outside the matching
// namespaces (so the API server never sends it their objects), picks up a
// namespace that starts matching and drops one that stops, while it runs.
func TestNamespaceSelector(t *testing.T) {
	t.Parallel()
	in, out := env.NewNamespace(t), env.NewNamespace(t)
	key, value := "hotcert.dev/test-scope", in // unique to this run
	labelNamespace(t, in, key, &value)
	for _, ns := range []string{in, out} {
		createSecret(t, secret(ns, "s", map[string]string{"a": "1"}))
		create(t, deployment(ns, "app", 0, envFrom("s", "a"), optIn))
	}
	var log requestLog
	o := testOptions()
	o.NamespaceSelector = labels.SelectorFromSet(labels.Set{key: value})
	c := startControllerIn(t, log.config(), nil, o) // every namespace, narrowed by the selector
	waitAdopted(t, in, "app")

	// Nothing of the other namespace, nothing across namespaces.
	for _, res := range scopedResources {
		reqs := log.of(res)
		for _, r := range reqs {
			if r.namespace != in {
				t.Errorf("%s %s in namespace %q: want only namespace %s", r.verb, res, r.namespace, in)
			}
		}
		if !slices.ContainsFunc(reqs, func(r apiRequest) bool { return r.verb == "WATCH" && r.namespace == in }) {
			t.Errorf("no watch of %s in %s: %v", res, in, reqs)
		}
	}
	if got := cachedDeployments(t, c, out); len(got) != 0 {
		t.Errorf("the cache holds %v of namespace %s, out of scope", got, out)
	}
	if keys := c.ctl.view.Store().Keys(rollout.KindSecret, out); len(keys) != 0 {
		t.Errorf("the controller keeps %v of namespace %s, out of scope", keys, out)
	}
	if d := getDeployment(t, out, "app"); d.Annotations[rollout.AnnotationAppliedHash] != "" {
		t.Errorf("%s/app, out of scope, was adopted", out)
	}

	// The other namespace starts matching: picked up and rolled.
	labelNamespace(t, out, key, &value)
	waitAdopted(t, out, "app")
	before := podTemplate(t, out, "app")
	updateSecret(t, out, "s", setKey("a", "2"))
	waitFor(t, out+"/app to roll", func() (bool, error) { return podTemplate(t, out, "app") != before, nil })

	// The first stops matching: dropped, its watches stop, its workload is
	// told and not rolled.
	labelNamespace(t, in, key, nil)
	waitFor(t, "namespace "+in+" to be dropped", func() (bool, error) {
		return len(cachedDeployments(t, c, in)) == 0 && len(c.ctl.view.Store().Keys(rollout.KindSecret, in)) == 0, nil
	})
	waitEvent(t, in, "app", eventOutOfScope, "namespace selector")
	mark := log.len()
	inBefore, outBefore := podTemplate(t, in, "app"), podTemplate(t, out, "app")
	updateSecret(t, in, "s", setKey("a", "3"))
	updateSecret(t, out, "s", setKey("a", "3"))
	waitFor(t, out+"/app to roll again", func() (bool, error) { return podTemplate(t, out, "app") != outBefore, nil })
	if podTemplate(t, in, "app") != inBefore {
		t.Errorf("%s/app was rolled after its namespace left the scope", in)
	}
	for _, r := range log.since(mark) {
		if r.namespace == in {
			t.Errorf("%s %s in %s after it left the scope", r.verb, r.resource, in)
		}
	}
	if d := getDeployment(t, in, "app"); d.Annotations[rollout.AnnotationAppliedHash] == "" {
		t.Errorf("%s/app lost its state annotations when it left the scope", in)
	}
}

// TestWorkloadSelector: under a workload selector, workload watches carry it
// (the API server sends matching workloads only); a managed workload whose
// labels stop matching is told with an Event and not rolled, keeps its state,
// and is managed from it again when it matches again.
func TestWorkloadSelector(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	web := map[string]string{"tier": "web"}
	for _, name := range []string{"in", "other", "out"} {
		createSecret(t, secret(ns, name, map[string]string{"a": "1"}))
		d := deployment(ns, name, 0, envFrom(name, "a"), optIn)
		if name != "out" {
			d.Labels = web
		}
		create(t, d)
	}
	var log requestLog
	o := testOptions()
	o.WorkloadSelector = labels.SelectorFromSet(web)
	c := startControllerIn(t, log.config(), []string{ns}, o)
	waitAdopted(t, ns, "in")
	waitAdopted(t, ns, "other")

	for _, res := range []string{"deployments", "statefulsets", "daemonsets"} {
		reqs := log.of(res)
		if len(reqs) == 0 {
			t.Errorf("no list or watch of %s", res)
		}
		for _, r := range reqs {
			if r.selector != "tier=web" {
				t.Errorf("%s %s with label selector %q, want tier=web", r.verb, res, r.selector)
			}
		}
	}
	if got := cachedDeployments(t, c, ns); !slices.Equal(got, []string{"in", "other"}) {
		t.Errorf("cached Deployments %v, want [in other]", got)
	}
	if keys := c.ctl.view.Store().Keys(rollout.KindSecret, ns); slices.ContainsFunc(keys, func(k clusterview.Key) bool { return k.Name == "out" }) {
		t.Errorf("the controller keeps the Secret of an unselected workload: %v", keys)
	}

	// "in" loses the label: told, not rolled, state kept.
	patchLabels(t, ns, "in", map[string]*string{"tier": nil})
	waitEvent(t, ns, "in", eventOutOfScope, "workload selector")
	inBefore, otherBefore := podTemplate(t, ns, "in"), podTemplate(t, ns, "other")
	updateSecret(t, ns, "in", setKey("a", "2"))
	updateSecret(t, ns, "other", setKey("a", "2"))
	updateSecret(t, ns, "out", setKey("a", "2"))
	waitFor(t, "other to roll", func() (bool, error) { return podTemplate(t, ns, "other") != otherBefore, nil })
	if podTemplate(t, ns, "in") != inBefore {
		t.Error("in was rolled after it left the scope")
	}
	if d := getDeployment(t, ns, "out"); d.Annotations[rollout.AnnotationAppliedHash] != "" {
		t.Error("out, never selected, was adopted")
	}
	if d := getDeployment(t, ns, "in"); d.Annotations[rollout.AnnotationAppliedHash] == "" {
		t.Error("in lost its state annotations when it left the scope")
	}

	// Back in scope: managed from its recorded state, so the change made
	// while it was out rolls it.
	web2 := "web"
	patchLabels(t, ns, "in", map[string]*string{"tier": &web2})
	waitFor(t, "in to roll once back in scope", func() (bool, error) { return podTemplate(t, ns, "in") != inBefore, nil })
	if n := len(events(t, ns, "in", eventOutOfScope)); n != 1 {
		t.Errorf("%d OutOfScope Events on in, want 1", n)
	}
}

func patchLabels(t testing.TB, ns, name string, kv map[string]*string) {
	t.Helper()
	patch := mustJSON(map[string]any{"metadata": map[string]any{"labels": kv}})
	if _, err := clientset().AppsV1().Deployments(ns).Patch(testContext(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(fmt.Errorf("patching the labels of %s: %w", name, err))
	}
}
