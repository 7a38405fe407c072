package jwtkube_test

import (
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtkube"
	"github.com/hotcert/hotcert/source/kube"
)

// failureCounter is a jwtkeys.Observer that counts reported failures, as the
// failure metric does.
type failureCounter struct {
	mu sync.Mutex
	n  int
}

func (*failureCounter) ObserveLoad(string, jwtkeys.SetInfo, bool) {}
func (c *failureCounter) ObserveFailure(string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}
func (*failureCounter) ObserveKeys(string, jwtkeys.SetInfo)        {}
func (*failureCounter) ObserveVerify(string, jwtkeys.RejectReason) {}
func (c *failureCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestLostWatchIsReported: a KeySet whose Secret can no longer be watched or read
// reports it once — one failure line, one failure observation, Status, and one
// lost-watch line through its own logger — while its keys keep signing; access restored, the next poll loads the keys rotated meanwhile.
func TestLostWatchIsReported(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	rbac := env.Clientset().RbacV1().RoleBindings(ns)
	a, _, kidA := genKey(t, jwtkeys.ES256)
	b, pubB, kidB := genKey(t, jwtkeys.ES256)
	if _, err := secrets.Create(ctx, secret(map[string][]byte{"signing.key": a}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "token-keys-reader-" + ns
	cfg := env.NewRestrictedConfig(t, user, []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{secretName}, Verbs: []string{"get", "list", "watch"},
	}}, ns)
	cut := &kubetest.WatchCutter{}
	cfg.Wrap(cut.Wrap)
	restricted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs, failures := &testutil.LogBuffer{}, &failureCounter{}
	// No grace: the refusal is reported at once (package source/kube tests the
	// grace); no logger of its own: the informer logs through the KeySet's.
	ks := startKeySet(t, jwtkube.NewSecret(restricted, ns, secretName, jwtkube.WithWatch(kube.WithRefusalGrace(0))), logs, jwtkeys.WithObserver(failures))
	// The informer follows the Secret: an update arrives without a poll.
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": a, "verify.pem": pubB}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the update through the watch", func() bool { return strings.Contains(string(ks.JWKS()), kidB) })
	testutil.WaitFor(t, "polls answered from the informer's cache", func() bool {
		n := cut.Requests()
		_ = ks.Reload(ctx)
		return cut.Requests() == n
	})

	binding, err := rbac.Get(ctx, "kubetest:"+user, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// An open watch outlives the revocation; once it is broken, the next is refused
	// and a poll (Reload) goes to the API server, which refuses too.
	testutil.WaitFor(t, "the lost access to be reported", func() bool {
		cut.Cut()
		_ = ks.Reload(ctx)
		return failures.count() > 0
	})
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": b}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_ = ks.Reload(ctx)
	}
	st := ks.Status()
	if failures.count() != 1 || logs.Count("JWT signing key reload failed") != 1 {
		t.Fatalf("failures %d, failure lines %d; want 1 and 1\n%s", failures.count(), logs.Count("JWT signing key reload failed"), logs)
	}
	if st.LastError == nil || hotcert.ReasonOf(st.LastError) != hotcert.ReasonRead ||
		!strings.Contains(st.LastError.Error(), "Secret "+ns+"/"+secretName) || !strings.Contains(st.LastError.Error(), "forbidden") {
		t.Fatalf("Status.LastError = %v, want a read failure naming the Secret and the refusal", st.LastError)
	}
	if ks.SigningKeyID() != kidA {
		t.Fatal("the last good keys stopped signing")
	}
	if n := logs.Count("can no longer list or watch; reading from the API server until it can"); n != 1 || !strings.Contains(logs.String(), "component=jwt_signing object=") {
		t.Fatalf("%d lost-watch lines in the KeySet's log, want 1 with its component\n%s", n, logs)
	}

	binding.ResourceVersion = ""
	if _, err := rbac.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the rotated key loaded by a poll", func() bool {
		_ = ks.Reload(ctx)
		return ks.SigningKeyID() == kidB
	})
	if ks.Status().LastError != nil {
		t.Fatalf("status still failing: %v", ks.Status().LastError)
	}
}
