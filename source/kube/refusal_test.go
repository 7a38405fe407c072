package kube

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// apiGate is a rest.Config transport wrapper that, while down, fails a client's
// requests as an unreachable API server does (connection refused), and counts the
// list calls that reach the API server (one per client-go ListAndWatch attempt).
type apiGate struct {
	down  atomic.Bool
	lists atomic.Int64
}

func (g *apiGate) Wrap(rt http.RoundTripper) http.RoundTripper {
	return kubetest.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if g.down.Load() {
			refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
			return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: refused}
		}
		resp, err := rt.RoundTrip(req)
		q := req.URL.Query()
		if err == nil && resp.StatusCode == http.StatusOK && q.Get("watch") != "true" && q.Has("fieldSelector") {
			g.lists.Add(1)
		}
		return resp, err
	})
}

// reader is a restricted user allowed get, list and watch on one Secret, with its
// clients' watches cut and requests gated on demand.
type reader struct {
	user   string
	client kubernetes.Interface
	cut    *kubetest.WatchCutter
	gate   *apiGate
}

func newReader(t *testing.T, ns string, rules ...rbacv1.PolicyRule) *reader {
	t.Helper()
	rd := &reader{user: "tls-reader-" + ns, cut: &kubetest.WatchCutter{}, gate: &apiGate{}}
	if len(rules) == 0 {
		rules = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"},
			ResourceNames: []string{"api-tls"}, Verbs: []string{"get", "list", "watch"}}}
	}
	cfg := env.NewRestrictedConfig(t, rd.user, rules, ns)
	cfg.Wrap(rd.cut.Wrap)
	cfg.Wrap(rd.gate.Wrap)
	var err error
	if rd.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return rd
}

// loseWatch breaks the informer's open watch until the informer says it cannot
// follow the object any more.
func (rd *reader) loseWatch(t *testing.T, src *Source) {
	t.Helper()
	testutil.WaitFor(t, "the informer to lose its watch", func() bool {
		rd.cut.Cut()
		return src.keys.informer.broken.Load() != nil
	})
}

// waitRefused waits until the API server's authorizer refuses rd a GET of the
// Secret api-tls (its RBAC caches follow a change with a delay), asking as the
// admin, so that rd itself sends nothing that could still be allowed.
func (rd *reader) waitRefused(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: rd.user, Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: "api-tls"},
	}}
	testutil.WaitFor(t, "the GET to be refused", func() bool {
		r, err := env.Clientset().AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		return err == nil && !r.Status.Allowed
	})
}

// TestRefusalGraceIsMeasuredFromTheFirstRefusal reproduces what a restarting API
// server does to a reader whose RBAC never changed: unreachable for a moment, then
// refusing reads (403) for a moment more while its authorizer warms up. Neither is
// reported, though together they last longer than the grace: the refusals' window
// starts at the first refusal, not at the first unreachable read. A source given no
// logger says it lost the watch, once, through the Reloader's logger.
func TestRefusalGraceIsMeasuredFromTheFirstRefusal(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	rbac := env.Clientset().RbacV1().RoleBindings(ns)
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", a, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rd := newReader(t, ns)
	clk := testingclock.NewFakeClock(time.Now())
	src := NewSecret(rd.client, ns, "api-tls", withClock(clk))
	rn := start(t, src) // settle 0: a failure would be reported at once
	waitSynced(t, src)
	noFailure := func(when string) {
		t.Helper()
		if err := rn.r.Reload(ctx); err != nil || len(rn.obs.Failures()) != 0 || rn.logs.Count("TLS certificate reload failed") != 0 {
			t.Fatalf("%s: Reload %v, failures %v\n%s", when, err, rn.obs.Failures(), rn.logs)
		}
	}

	// The API server goes away.
	rd.gate.down.Store(true)
	rd.loseWatch(t, src)
	noFailure("unreachable")
	if src.keys.grace.failingSince(unanswered).IsZero() {
		t.Fatal("no read went to the API server while it was unreachable: the test proves nothing")
	}
	clk.Step(DefaultRefusalGrace - time.Second)
	noFailure("unreachable, just inside the grace")

	// It is back, and refuses reads while its authorizer warms up.
	binding, err := rbac.Get(ctx, "kubetest:"+rd.user, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rd.waitRefused(t, ctx, ns)
	unreachableSince := src.keys.grace.failingSince(unanswered)
	rd.gate.down.Store(false)
	noFailure("first refusal")
	if src.keys.grace.failingSince(refused).IsZero() || !src.keys.grace.failingSince(unanswered).Equal(unreachableSince) {
		t.Fatal("no read was refused, or one was answered in between: the test proves nothing")
	}
	clk.Step(2 * time.Second) // past the grace counted from the first unreachable read
	noFailure("refused, past the grace of the unreachable reads")

	// Warmed up: it answers again; the renewal made meanwhile is read from the API.
	binding.ResourceVersion = ""
	if _, err := rbac.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", b, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the renewal served", func() bool {
		_ = rn.r.Reload(ctx)
		return rn.r.Current().Leaf().SerialNumber.Cmp(b.Cert.SerialNumber) == 0
	})
	clk.Step(DefaultRefusalGrace) // the windows were reset by the answer
	noFailure("after the outage")
	if st := rn.r.Status(); st.LastError != nil || st.Failures != 0 {
		t.Fatalf("status %+v after an outage shorter than the grace", st)
	}
	if n := rn.logs.Count("can no longer list or watch; reading from the API server until it can"); n != 1 {
		t.Fatalf("%d lost-watch lines in the Reloader's log, want 1\n%s", n, rn.logs)
	}
}

// reflectorRetry bounds the wait for a client-go reflector's next list and
// watch after a failed one: its backoff doubles from 0.8 s up to 30 s, with
// as much again of jitter (cache.ReflectorOptions' defaults, which a
// SharedIndexInformer does not let one set): its fifth try comes 6.4 to
// 12.8 s after the fourth failed, past WaitFor's 10 s (1 run in CI).
const reflectorRetry = time.Minute

// TestWatchForbiddenWhileGetAllowed: the reader may get and list its Secret but no
// longer watch it. Every client-go retry lists successfully and is refused the
// watch: the cache does not follow, so the source says so once, through the
// Reloader's logger (it was given none), and never says "watch restored" until a
// watch works again; meanwhile reads GET the Secret, so a renewal is served by the
// next poll, and nothing is counted as a failure.
func TestWatchForbiddenWhileGetAllowed(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	roles := env.Clientset().RbacV1().Roles(ns)
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", a, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rd := newReader(t, ns)
	src := NewSecret(rd.client, ns, "api-tls") // no logger of its own
	rn := start(t, src)
	waitSynced(t, src)

	setVerbs := func(verbs ...string) {
		t.Helper()
		role, err := roles.Get(ctx, "kubetest:"+rd.user, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		role.Rules[0].Verbs = verbs
		if _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setVerbs("get", "list")
	rd.loseWatch(t, src)
	lists := rd.gate.lists.Load()
	testutil.WaitForWithin(t, reflectorRetry, "two client-go retries that list and are refused the watch", func() bool {
		return rd.gate.lists.Load() >= lists+2
	})
	const lost, restored = "can no longer list or watch; reading from the API server until it can", "watch restored"
	if n, m := rn.logs.Count(lost), rn.logs.Count(restored); n != 1 || m != 0 {
		t.Fatalf("%d lost-watch and %d restored lines over the retries, want 1 and 0\n%s", n, m, rn.logs)
	}
	for _, line := range strings.Split(rn.logs.String(), "\n") {
		if strings.Contains(line, lost) && (!strings.Contains(line, "component=agent_grpc") || !strings.Contains(line, "level=WARN")) {
			t.Errorf("the lost-watch line lacks the Reloader's component or level: %s", line)
		}
	}
	if src.keys.informer.broken.Load() == nil {
		t.Fatal("a successful list made the cache pass for following the Secret")
	}

	// GET works: the next poll serves a renewal.
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", b, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the renewal served by a poll", func() bool {
		_ = rn.r.Reload(ctx)
		return rn.r.Current().Leaf().SerialNumber.Cmp(b.Cert.SerialNumber) == 0
	})

	setVerbs("get", "list", "watch")
	testutil.WaitForWithin(t, reflectorRetry, "the watch restored", func() bool { return rn.logs.Count(restored) == 1 })
	if n := rn.logs.Count(lost); n != 1 || len(rn.obs.Failures()) != 0 {
		t.Fatalf("%d lost-watch lines, failures %v\n%s", n, rn.obs.Failures(), rn.logs)
	}
}
