package census_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
	"github.com/hotcert/hotcert/rollout/internal/podwire"
)

// TestCensusThatCannotListPodsSaysWhy: a controller whose RBAC lets it read
// everything the census needs but the list of pods (a ClusterRole without
// pods list, the mistake of a hand-written role) fails each census with
// the API server's refusal, named as the list of pods of every namespace,
// as soon as the refusal comes (not after the census's wait for the list),
// and counts it in hotcert_census_errors_total; it writes no status that
// claims a count of consumers.
func TestCensusThatCannotListPodsSaysWhy(t *testing.T) {
	ns := env.NewNamespace(t)
	name := configMapRotation(t, ns)
	all := []string{"*"}
	cfg := env.NewRestrictedConfig(t, "census-without-pods-"+ns, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "namespaces", "events", "services", "endpoints"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}, // no list, no watch
		{APIGroups: []string{"events.k8s.io", "discovery.k8s.io", "certificates.k8s.io", "coordination.k8s.io", "hotcert.dev", "trust.cert-manager.io"},
			Resources: all, Verbs: all},
	}, "")

	log, logs := capturedLog()
	reg := startCensusAs(t, cfg, log, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond})

	want := "census: " + name + ": listing the pods of every namespace: "
	testutil.WaitFor(t, "the census failing on the refused list", func() bool { return strings.Contains(logs(), want) })
	for _, line := range strings.Split(logs(), "\n") {
		if i := strings.Index(line, want); i >= 0 {
			// A watch first: the census streams its first list of the pods.
			if got := line[i+len(want):]; !strings.HasPrefix(got, "pods is forbidden: User") || !strings.Contains(got, "census-without-pods-"+ns) {
				t.Fatalf("the census failed with %q, want the API server's refusal", got)
			}
		}
	}
	if n, _ := metricValue(t, reg, "hotcert_census_errors_total", name); n < 1 {
		t.Fatalf("hotcert_census_errors_total{rotation=%q} %v, want the failed censuses counted", name, n)
	}
	tr := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(testContext(t), client.ObjectKey{Name: name}, tr); err != nil {
		t.Fatal(err)
	}
	if tr.Status.ObservedGeneration != 0 || tr.Status.Consumers.Total != 0 {
		t.Fatalf("status %+v written by a census that could not list the pods", tr.Status)
	}
}

// podRequests records the requests for the pods of one namespace a
// census's client makes, and, when refuseStreams is set, answers a streamed
// list (a watch with sendInitialEvents) as an API server without streamed
// lists does (before Kubernetes 1.27, or with its WatchList feature off).
type podRequests struct {
	t             *testing.T
	path          string // /api/v1/namespaces/NS/pods
	refuseStreams bool

	mu                      sync.Mutex
	lists, streams, watches int
}

func (p *podRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return kubetest.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.URL.Path != p.path {
			return rt.RoundTrip(req)
		}
		q := req.URL.Query()
		stream := q.Get("sendInitialEvents") == "true"
		p.mu.Lock()
		switch {
		case stream:
			p.streams++
		case q.Get("watch") == "true":
			p.watches++
		default:
			p.lists++
		}
		p.mu.Unlock()
		if stream && p.refuseStreams {
			// The answer of such a server: its validation of the options.
			return apiErrorResponse(p.t, req, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "",
				field.ErrorList{field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")})), nil
		}
		return rt.RoundTrip(req)
	})
}

func (p *podRequests) counts() (lists, streams, watches int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lists, p.streams, p.watches
}

// TestCensusListsPodsAsAStream: the census's first list of the pods is a
// streamed list (the API server's initial events; no LIST request), and it
// follows the pods from the end of that stream: a pod created later is
// counted, one deleted is no longer. With an API server that refuses
// streamed lists, the census lists the pods with an ordinary list, asks
// for a stream no more, and follows them alike.
func TestCensusListsPodsAsAStream(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused=%v", refuse), func(t *testing.T) {
			ns := env.NewNamespace(t)
			name := configMapRotation(t, ns)
			longAgo := time.Now().Add(-time.Hour)
			for _, n := range []string{"a", "b", "c"} {
				createPod(t, ns, consumerPod{name: n, vol: configMapVolume("ca"), started: longAgo})
			}
			reqs := &podRequests{t: t, path: "/api/v1/namespaces/" + ns + "/pods", refuseStreams: refuse}
			cfg := rest.CopyConfig(env.Config())
			cfg.Wrap(reqs.wrap)
			startCensusAs(t, cfg, logr.Discard(), census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond, Namespaces: []string{ns}})

			total := func(n int32) func(*v1alpha1.TrustRotation) bool {
				return func(tr *v1alpha1.TrustRotation) bool {
					return tr.Status.ObservedGeneration == tr.Generation && tr.Status.Consumers.Total == n
				}
			}
			waitRotation(t, name, "the census of the pods listed", total(3))
			lists, streams, _ := reqs.counts()
			if !refuse && (lists != 0 || streams != 1) {
				t.Fatalf("%d LISTs and %d streamed lists of the pods, want one streamed list", lists, streams)
			}
			if refuse && (lists != 1 || streams != 1) {
				t.Fatalf("%d LISTs and %d streamed lists of the pods, want the refused stream, then one LIST", lists, streams)
			}
			createPod(t, ns, consumerPod{name: "d", vol: configMapVolume("ca"), started: longAgo})
			waitRotation(t, name, "the pod created after the list counted", total(4))
			if err := env.Client().Delete(testContext(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}},
				client.GracePeriodSeconds(0)); err != nil {
				t.Fatal(err)
			}
			tr := waitRotation(t, name, "the pod deleted no longer counted", total(3))
			if straggler(tr, "a") != nil {
				t.Fatalf("the deleted pod a is still a straggler: %+v", tr.Status.Stragglers)
			}
			if l, s, w := reqs.counts(); l != lists || s != streams || w < 1 {
				t.Fatalf("after the changes: %d LISTs, %d streamed lists, %d watches of the pods; want no new list, and the changes followed by a watch", l, s, w)
			}
		})
	}
}

// TestCensusDecodesPodsFromTheAPIServer: the census's client of the pods
// reads what the API server sends — a Pod got, the events of a streamed
// list and its initial-events-end bookmark — with podwire.Decode: the
// fields a record reads, as the API server stores them (a subPath mount,
// labels, the running container's start time, to the second), and none of
// the rest (the node, the image, the managed fields).
func TestCensusDecodesPodsFromTheAPIServer(t *testing.T) {
	ns := env.NewNamespace(t)
	started := time.Now().Add(-time.Hour).Truncate(time.Second)
	createPod(t, ns, consumerPod{name: "a", vol: configMapVolume("ca"), subPath: "ca.crt", metricsPort: 9090, started: started})
	hc, err := rest.HTTPClientFor(env.Config())
	if err != nil {
		t.Fatal(err)
	}
	pods, err := podwire.NewPodsClient(env.Config(), hc)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, p *corev1.Pod) {
		t.Helper()
		c := p.Spec.Containers
		if p.Name != "a" || p.Namespace != ns || p.UID == "" || p.ResourceVersion == "" || p.Labels["app"] != "a" ||
			len(c) != 1 || len(c[0].VolumeMounts) != 1 || c[0].VolumeMounts[0].SubPath != "ca.crt" || len(c[0].Ports) != 1 || c[0].Ports[0].ContainerPort != 9090 ||
			len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].ConfigMap == nil || p.Spec.Volumes[0].ConfigMap.Name != "ca" ||
			p.Status.Phase != corev1.PodRunning || p.Status.PodIP != "127.0.0.1" || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].State.Running == nil || !p.Status.ContainerStatuses[0].State.Running.StartedAt.Time.Equal(started) {
			t.Fatalf("%s: decoded %+v, want what a record reads of pod a", what, p)
		}
		if p.Spec.SchedulerName != "" || c[0].Image != "" || p.ManagedFields != nil || p.CreationTimestamp != (metav1.Time{}) {
			t.Fatalf("%s: decoded more than a record reads: %+v", what, p)
		}
	}
	p, err := pods.Pods(ns).Get(testContext(t), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	check("a Pod got", p)

	w, err := pods.Pods(ns).Watch(testContext(t), metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ended := false; !ended; {
		select {
		case ev := <-w.ResultChan():
			switch ev.Type {
			case watch.Added:
				check("a streamed list's event", ev.Object.(*corev1.Pod))
			case watch.Bookmark:
				ended = ev.Object.(*corev1.Pod).Annotations[metav1.InitialEventsAnnotationKey] == "true"
			default:
				t.Fatalf("event %s %+v", ev.Type, ev.Object)
			}
		case <-time.After(pollTimeout):
			t.Fatal("no initial-events-end bookmark")
		}
	}
}
