package kube

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func tlsSecret(ns, name string, l *hotcerttest.Leaf, bundle []byte) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM},
	}
	if bundle != nil {
		s.Data["ca.crt"] = bundle
	}
	return s
}

// running is a started Reloader with its observer and logs.
type running struct {
	r    *hotcert.Reloader
	obs  *testutil.Observer
	logs *testutil.LogBuffer
}

func start(t *testing.T, src hotcert.Source, extra ...hotcert.Option) *running {
	t.Helper()
	rn := &running{obs: &testutil.Observer{}, logs: &testutil.LogBuffer{}}
	opts := append([]hotcert.Option{
		hotcert.WithLogger(slog.New(slog.NewTextHandler(rn.logs, nil))),
		hotcert.WithObserver(rn.obs),
		hotcert.WithComponent("agent_grpc"),
		hotcert.WithSettle(0), // the API writes objects atomically: nothing is ever mid-write
		hotcert.WithPollInterval(0),
	}, extra...)
	r, err := hotcert.New(ctxFor(t), src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	rn.r = r
	done := make(chan error, 1)
	go func() { done <- r.Start(context.Background()) }()
	t.Cleanup(func() {
		r.Close()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return rn
}

func (rn *running) waitServing(t *testing.T, l *hotcerttest.Leaf) {
	t.Helper()
	testutil.WaitFor(t, "leaf served", func() bool { return rn.r.Current().Leaf().SerialNumber.Cmp(l.Cert.SerialNumber) == 0 })
}

// waitSynced waits until the source's informer has synced (Reads come from its cache).
func waitSynced(t *testing.T, s *Source) {
	t.Helper()
	testutil.WaitFor(t, "informer sync", func() bool { return s.keys.informer.store.Load() != nil })
}

// serve runs a TLS server whose certificate comes from p on every handshake and
// returns a function that dials it and returns the served serial.
func serve(t *testing.T, p hotcert.Provider, roots *hotcerttest.CA) func() string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return p.Current().Certificate(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) { _ = c.(*tls.Conn).Handshake(); c.Close() }(c)
		}
	}()
	return func() string {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: hotcerttest.Pool(roots)})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
}

func TestCertManagerRenewalShowsUpInHandshakes(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	ca := hotcerttest.MustNewCA()
	a, b, c := ca.MustIssue(), ca.MustIssue(), ca.MustIssue()
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", a, hotcerttest.BundlePEM(ca)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := NewSecret(env.Clientset(), ns, "api-tls")
	rn := start(t, src)
	dial := serve(t, rn.r, ca)
	if got := dial(); got != a.Cert.SerialNumber.String() {
		t.Fatalf("served %s, want the first certificate", got)
	}

	// cert-manager renews: one update writes tls.crt, tls.key and ca.crt together.
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", b, hotcerttest.BundlePEM(ca)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "renewed certificate in a handshake", func() bool { return dial() == b.Cert.SerialNumber.String() })

	// Bad content: a key that does not match. The last good certificate keeps serving.
	bad := tlsSecret(ns, "api-tls", c, hotcerttest.BundlePEM(ca))
	bad.Data["tls.key"] = a.KeyPEM
	if _, err := secrets.Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the failure to be reported", func() bool { return len(rn.obs.Failures()) == 1 })
	if got := dial(); got != b.Cert.SerialNumber.String() {
		t.Fatalf("served %s after a bad update, want the last good certificate", got)
	}
	// A label-only update re-delivers the same bad data: still counted once.
	bad.Labels = map[string]string{"touched": "yes"}
	if _, err := secrets.Update(ctx, bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSynced(t, src)
	_ = rn.r.Reload(ctx)
	if n := len(rn.obs.Failures()); n != 1 || rn.logs.Count("TLS certificate reload failed") != 1 {
		t.Fatalf("failures %d, lines %d; want 1 and 1", n, rn.logs.Count("TLS certificate reload failed"))
	}
	if !strings.Contains(rn.logs.String(), "Secret "+ns+"/api-tls") {
		t.Errorf("failure line does not name the Secret:\n%s", rn.logs)
	}
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", c, hotcerttest.BundlePEM(ca)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "recovery", func() bool { return dial() == c.Cert.SerialNumber.String() })
	if hotcerttest.ContainsKeyMaterial(rn.logs.String(), a, b, c) {
		t.Fatal("logs contain key material")
	}
}

func TestOnlyItsObjectIsCached(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	for i := range 1000 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("unrelated-%04d", i)}, Data: map[string][]byte{"x": []byte("y")}}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", leaf, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := NewSecret(env.Clientset(), ns, "api-tls")
	start(t, src)
	waitSynced(t, src)
	if n := src.keys.informer.cachedObjects(); n != 1 {
		t.Fatalf("the informer caches %d Secrets, want only its own", n)
	}
}

func TestResyncsCauseNoNoise(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	ca := hotcerttest.MustNewCA()
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, tlsSecret(ns, "api-tls", ca.MustIssue(), nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// client-go clamps resync periods to at least 1 s.
	src := NewSecret(env.Clientset(), ns, "api-tls", WithResync(time.Second))
	var events atomic.Int64
	counted := &countingSource{Source: src, events: &events}
	rn := start(t, counted)
	// The add, the post-sync notification, then at least three resyncs.
	testutil.WaitFor(t, "three resyncs", func() bool { return events.Load() >= 5 })
	if rn.obs.Loads() != 0 || len(rn.obs.Failures()) != 0 || rn.logs.Count("TLS certificate reloaded") != 0 {
		t.Fatalf("resyncs caused reloads=%d failures=%d", rn.obs.Loads(), len(rn.obs.Failures()))
	}
}

// countingSource counts change notifications.
type countingSource struct {
	*Source
	events *atomic.Int64
}

func (c *countingSource) Watch(ctx context.Context, changed func()) error {
	return c.Source.Watch(ctx, func() { c.events.Add(1); changed() })
}

func TestDeletedKeepsLastGoodAndRecreatedReloads(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", a, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rn := start(t, NewSecret(env.Clientset(), ns, "api-tls"))
	if err := secrets.Delete(ctx, "api-tls", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "deletion reported", func() bool { return len(rn.obs.Failures()) == 1 })
	if hotcert.ReasonOf(rn.obs.Failures()[0]) != hotcert.ReasonMissing || !strings.Contains(rn.logs.String(), "does not exist") {
		t.Fatalf("deletion reported as %v", rn.obs.Failures()[0])
	}
	rn.waitServing(t, a)
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", b, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rn.waitServing(t, b)
}

func TestMissingAtStartup(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	_, err := hotcert.New(ctx, NewSecret(env.Clientset(), ns, "not-issued-yet"))
	if err == nil || !strings.Contains(err.Error(), "Secret "+ns+"/not-issued-yet: does not exist") {
		t.Fatalf("startup error %v", err)
	}
	missingKey := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-key"}, Data: map[string][]byte{"tls.crt": []byte("x")}}
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, missingKey, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hotcert.New(ctx, NewSecret(env.Clientset(), ns, "no-key")); err == nil || !strings.Contains(err.Error(), "key tls.key: does not exist") {
		t.Fatalf("startup error for a missing key: %v", err)
	}

	// With an initial wait, a Secret that cert-manager issues a moment later is fine.
	leaf := hotcerttest.MustNewCA().MustIssue()
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = env.Clientset().CoreV1().Secrets(ns).Create(context.Background(), tlsSecret(ns, "issued-soon", leaf, nil), metav1.CreateOptions{})
	}()
	r, err := hotcert.New(ctx, NewSecret(env.Clientset(), ns, "issued-soon"), hotcert.WithInitialWait(30*time.Second))
	if err != nil {
		t.Fatalf("initial wait: %v", err)
	}
	r.Close()
}

func TestComposeSecretIdentityWithConfigMapTrust(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	cs := env.Clientset()
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	leaf := oldCA.MustIssue()
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, tlsSecret(ns, "api-tls", leaf, hotcerttest.BundlePEM(newCA)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-ca"}, Data: map[string]string{"bundle.pem": string(hotcerttest.BundlePEM(oldCA))}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := hotcert.Compose(NewSecret(cs, ns, "api-tls"), NewConfigMap(cs, ns, "agent-ca", WithCAKey("bundle.pem")))
	rn := start(t, src, hotcert.WithValidation(hotcert.WithChainToOwnTrust()))
	m := rn.r.Current()
	if !m.HasIdentity() || len(m.TrustCertificates()) != 1 || !m.TrustCertificates()[0].Equal(oldCA.Cert) {
		t.Fatal("trust did not come from the ConfigMap (the Secret's ca.crt must be ignored)")
	}
	// Step 1 of a CA rotation: the union bundle.
	cm.Data["bundle.pem"] = string(hotcerttest.BundlePEM(oldCA, newCA))
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "union bundle", func() bool { return len(rn.r.Current().TrustCertificates()) == 2 })
	// Validated as one snapshot: a bundle without the leaf's CA is refused.
	cm.Data["bundle.pem"] = string(hotcerttest.BundlePEM(newCA))
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "refusal", func() bool { return len(rn.obs.Failures()) == 1 })
	if hotcert.ReasonOf(rn.obs.Failures()[0]) != hotcert.ReasonChain || len(rn.r.Current().TrustCertificates()) != 2 {
		t.Fatalf("snapshot not validated as a whole: %v", rn.obs.Failures()[0])
	}
}

func TestMinimalRBAC(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	secrets := env.Clientset().CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", a, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := env.NewRestrictedConfig(t, "tls-reader-"+ns, []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{"api-tls"}, Verbs: []string{"get", "list", "watch"},
	}}, ns)
	restricted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restricted.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the restricted user can list every Secret: the test proves nothing")
	}
	src := NewSecret(restricted, ns, "api-tls")
	rn := start(t, src)
	waitSynced(t, src) // list+watch with the name selector is allowed by resourceNames
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", b, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rn.waitServing(t, b)
	if len(rn.obs.Failures()) != 0 {
		t.Fatalf("failures with minimal RBAC: %v", rn.obs.Failures())
	}
}

// TestAPIServerRestart runs alone: it takes the shared API server down. The reader
// is bound to the minimal Role the docs recommend, which never changes: a restart is
// not a failure. While the API server stops, starts and warms up its authorizer,
// reads are unreachable, then refused; the source holds the last answer (the grace's
// clock does not move: the restart here takes 5-16 s, its refusals well under a
// second, against a default grace of 30 s). Nothing is reported, the material keeps
// serving, a change made during the restart is loaded (and never replaced by the
// older material a cache that has not caught up yet holds), and each source says once
// that it lost its watch and once that it is back, through the Reloader's logger
// (or nothing, when client-go's retries of one watch call span the restart).
func TestAPIServerRestart(t *testing.T) {
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	cs := env.Clientset()
	secrets := cs.CoreV1().Secrets(ns)
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	if _, err := secrets.Create(ctx, tlsSecret(ns, "api-tls", a, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-ca"}, Data: map[string]string{"ca.crt": string(hotcerttest.BundlePEM(ca))}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rd := newReader(t, ns,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"api-tls"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"agent-ca"}, Verbs: []string{"get", "list", "watch"}})
	clk := testingclock.NewFakeClock(time.Now())
	id, trust := NewSecret(rd.client, ns, "api-tls", withClock(clk)), NewConfigMap(rd.client, ns, "agent-ca", withClock(clk))
	rn := start(t, hotcert.Compose(id, trust)) // settle 0: a failure would be reported at once
	waitSynced(t, id)
	waitSynced(t, trust)
	env.Restart(t)
	if err := rn.r.Reload(ctx); err != nil || rn.r.Current().Leaf().SerialNumber.Cmp(a.Cert.SerialNumber) != 0 {
		t.Fatalf("right after the restart: Reload %v; the material in use must stay", err)
	}
	// The change lands while the informer's watch is still broken or re-establishing.
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", b, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	rn.waitServing(t, b)
	testutil.WaitFor(t, "both watches restored", func() bool {
		return id.keys.informer.broken.Load() == nil && trust.keys.informer.broken.Load() == nil
	})
	_ = rn.r.Reload(ctx)
	if n := rn.obs.Loads(); n != 1 || rn.r.Current().Leaf().SerialNumber.Cmp(b.Cert.SerialNumber) != 0 {
		t.Errorf("%d reloads after the restart, want only the renewal's: a cache that had not caught up with the reads made without it was served\n%s", n, rn.logs)
	}
	if st := rn.r.Status(); st.Failures != 0 || st.LastError != nil || len(rn.obs.Failures()) != 0 || rn.logs.Count("TLS certificate reload failed") != 0 {
		t.Fatalf("a restart of the API server was reported: status %+v, failures %v\n%s", st, rn.obs.Failures(), rn.logs)
	}
	for _, s := range []*Source{id, trust} {
		lost := strings.Count(rn.logs.String(), `msg="can no longer list or watch; reading from the API server until it can" component=agent_grpc object="`+s.String())
		back := strings.Count(rn.logs.String(), `msg="watch restored" component=agent_grpc object="`+s.String())
		if lost > 1 || back != lost {
			t.Errorf("%s: %d lost-watch and %d restored lines in the Reloader's log, want one of each (or none, when a retried watch call spans the restart)\n%s", s, lost, back, rn.logs)
		}
	}
}

func TestEmptyOptionalCABundleIsNoBundle(t *testing.T) {
	t.Parallel()
	ctx, ns := ctxFor(t), env.NewNamespace(t)
	cs := env.Clientset()
	leaf := hotcerttest.MustNewCA().MustIssue()
	// Older cert-manager releases, ACME issuers and some charts write an empty ca.crt.
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, tlsSecret(ns, "api-tls", leaf, []byte{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := hotcert.New(ctx, NewSecret(cs, ns, "api-tls"))
	if err != nil {
		t.Fatalf("a good key pair with an empty ca.crt was refused: %v", err)
	}
	if !r.Current().HasIdentity() || r.Current().HasTrust() {
		t.Fatal("an empty ca.crt must read as no bundle")
	}
	r.Close()
	// Unless trust is required.
	_, err = hotcert.New(ctx, NewSecret(cs, ns, "api-tls"), hotcert.WithValidation(hotcert.WithRequireTrust()))
	if hotcert.ReasonOf(err) != hotcert.ReasonIncomplete || !strings.Contains(err.Error(), "Secret "+ns+"/api-tls") {
		t.Fatalf("with trust required: %v", err)
	}
	// A ConfigMap source exists for its bundle: there, empty is a bad bundle.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-ca"}, Data: map[string]string{"ca.crt": ""}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := hotcert.New(ctx, NewConfigMap(cs, ns, "agent-ca")); hotcert.ReasonOf(err) != hotcert.ReasonEmpty {
		t.Fatalf("empty ConfigMap bundle: %v", err)
	}
}

// TestLostWatchIsReportedAndPollsReachTheAPIServer revokes the reader's access and
// breaks its watch. The cached certificate must not pass for current: reads go to
// the API server, which refuses them; the refusal is held for the grace, measured
// from the first refusal, then reported once (log line, failure count, Status)
// without waiting for a poll, while the last good certificate keeps serving. Access
// restored, the next poll serves the renewal made in the meantime. The source's
// own logger says why, and the Reloader's does not repeat it.
func TestLostWatchIsReportedAndPollsReachTheAPIServer(t *testing.T) {
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
	logs, clk := &testutil.LogBuffer{}, testingclock.NewFakeClock(time.Now())
	const grace = 5 * time.Second
	src := NewSecret(rd.client, ns, "api-tls", WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithRefusalGrace(grace), withClock(clk))
	rn := start(t, src)
	waitSynced(t, src)

	binding, err := rbac.Get(ctx, "kubetest:"+rd.user, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rbac.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// An open watch outlives the revocation; the next one is refused.
	rd.loseWatch(t, src)
	// The renewal lands while the reader cannot see it.
	if _, err := secrets.Update(ctx, tlsSecret(ns, "api-tls", b, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "a read to be refused", func() bool {
		_ = rn.r.Reload(ctx) // what the poll ticker does
		return !src.keys.grace.failingSince(refused).IsZero()
	})
	clk.Step(grace - time.Millisecond)
	_ = rn.r.Reload(ctx)
	if n := len(rn.obs.Failures()); n != 0 {
		t.Fatalf("a refusal younger than the grace was reported: %v", rn.obs.Failures())
	}
	clk.Step(time.Millisecond) // the grace is over: the source asks for a read itself
	testutil.WaitFor(t, "the refusal reported", func() bool { return len(rn.obs.Failures()) > 0 })
	for range 3 {
		_ = rn.r.Reload(ctx)
	}
	clk.Step(grace)
	_ = rn.r.Reload(ctx)
	st := rn.r.Status()
	if n := len(rn.obs.Failures()); n != 1 || rn.logs.Count("TLS certificate reload failed") != 1 {
		t.Fatalf("failures %d, failure lines %d; want 1 and 1\n%s", n, rn.logs.Count("TLS certificate reload failed"), rn.logs)
	}
	if st.LastError == nil || !strings.Contains(st.LastError.Error(), "Secret "+ns+"/api-tls") || !strings.Contains(st.LastError.Error(), "forbidden") {
		t.Fatalf("Status.LastError = %v, want the Secret and the refusal", st.LastError)
	}
	if hotcert.ReasonOf(st.LastError) != hotcert.ReasonRead {
		t.Errorf("reason %s, want read", hotcert.ReasonOf(st.LastError))
	}
	rn.waitServing(t, a) // the last good certificate keeps serving
	const lost = "can no longer list or watch"
	if strings.Count(logs.String(), lost) != 1 || strings.Contains(rn.logs.String(), lost) {
		t.Errorf("the lost watch must be told once, by the source's own logger only:\nsource:\n%s\nreloader:\n%s", logs, rn.logs)
	}

	binding.ResourceVersion = ""
	if _, err := rbac.Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The next poll reads the renewal from the API server (the informer itself lists
	// again after its backoff, up to 30 s).
	testutil.WaitFor(t, "the renewal served", func() bool {
		_ = rn.r.Reload(ctx)
		return rn.r.Current().Leaf().SerialNumber.Cmp(b.Cert.SerialNumber) == 0
	})
	if err := rn.r.Status().LastError; err != nil {
		t.Fatalf("status still failing after recovery: %v", err)
	}
}
