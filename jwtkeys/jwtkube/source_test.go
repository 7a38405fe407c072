package jwtkube_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtkube"
)

// The informer machinery (field selector, cache, re-list) is source/kube's and is
// tested there too; these tests cover the key mapping and the KeySet behaviour on
// Secret updates, against a real API server (package internal/kubetest).

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env) }

const secretName = "agent-token-keys"

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func secret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName}, Data: data}
}

func genKey(t *testing.T, alg string) (priv, pub []byte, kid string) {
	t.Helper()
	priv, err := jwtkeys.GenerateSigningKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	pub, kid, err = jwtkeys.PublicKeyPEM(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub, kid
}

// startKeySet runs a KeySet over src until the test ends.
func startKeySet(t *testing.T, src jwtkeys.Source, logs *testutil.LogBuffer, opts ...jwtkeys.Option) *jwtkeys.KeySet {
	t.Helper()
	ctx := ctxFor(t)
	opts = append([]jwtkeys.Option{hotcert.WithSettle(0), hotcert.WithPollInterval(0),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}, opts...)
	ks, err := jwtkeys.New(ctx, src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ks.Start(ctx) }()
	t.Cleanup(func() {
		ks.Close()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	return ks
}

// The durable rotation written to the Secret: the next key is published, then signs;
// tokens of the previous key keep verifying. A deleted Secret keeps the last good
// keys, reported once naming the Secret; a recreated one is loaded.
func TestSecretRotation(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	a, pubA, kidA := genKey(t, jwtkeys.ES256)
	b, pubB, kidB := genKey(t, jwtkeys.EdDSA)
	if _, err := secrets.Create(ctx, secret(map[string][]byte{"signing.key": a}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := jwtkube.NewSecret(env.Clientset(), ns, secretName)
	if want := "Secret " + ns + "/" + secretName; src.String() != want {
		t.Fatalf("String() = %q, want %q", src.String(), want)
	}
	logs := &testutil.LogBuffer{}
	ks := startKeySet(t, src, logs)
	if ks.SigningKeyID() != kidA {
		t.Fatal("initial key")
	}
	tok, err := ks.Issue("agent", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": a, "verify.pem": pubB}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "next key published", func() bool { return strings.Contains(string(ks.JWKS()), kidB) })
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": b, "verify.pem": pubA}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "rotation", func() bool { return ks.SigningKeyID() == kidB })
	if _, err := ks.Verify(tok); err != nil {
		t.Fatalf("token signed before the rotation: %v", err)
	}
	// The key set is published before its log line is written: wait for the line.
	testutil.WaitFor(t, "the rotation line", func() bool { return logs.Count("JWT signing key rotated") >= 1 })
	if n := logs.Count("JWT signing key rotated"); n != 1 {
		t.Fatalf("%d rotation lines, want 1:\n%s", n, logs)
	}

	// An update that touches other keys only: no reload, no log line.
	gen := ks.Info().Generation
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": b, "verify.pem": pubA, "README": []byte("rotated")}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted Secret: the last good keys keep serving, the failure names the Secret.
	if err := secrets.Delete(ctx, secretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "failure report", func() bool { return logs.Count("JWT signing key reload failed") == 1 })
	if ks.SigningKeyID() != kidB || ks.Info().Generation != gen || !strings.Contains(logs.String(), "Secret "+ns+"/"+secretName) {
		t.Fatalf("after an unrelated update and a delete: signing %s, generation %d (want %d); logs:\n%s", ks.SigningKeyID(), ks.Info().Generation, gen, logs)
	}
	if _, err := ks.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if st := ks.Status(); st.LastError == nil || st.Failures != 1 {
		t.Fatalf("status after the delete: %+v", st)
	}

	// Recreated with the previous key removed: loaded, and its tokens are refused.
	if _, err := secrets.Create(ctx, secret(map[string][]byte{"signing.key": b}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the recreated Secret", func() bool { return ks.Status().LastError == nil && len(ks.Info().Keys) == 1 })
	// Refused. (KeySet.Verify filters on the set's algorithms before it looks the kid
	// up: with only an EdDSA key left, the removed ES256 key's token is "algorithm".)
	if _, err := ks.Verify(tok); err == nil || (jwtkeys.RejectReasonOf(err) != jwtkeys.ReasonUnknownKey && jwtkeys.RejectReasonOf(err) != jwtkeys.ReasonAlgorithm) {
		t.Fatalf("a token of the removed key: %v, want it refused", err)
	}
	if n := logs.Count("JWT signing key reload failed"); n != 1 {
		t.Fatalf("%d failure lines, want 1", n)
	}
}

func TestSecretKeys(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.NewNamespace(t)
	s1, err := jwtkeys.GenerateHMACSecret()
	if err != nil {
		t.Fatal(err)
	}
	_, pub, _ := genKey(t, jwtkeys.ES256)
	if _, err := env.Clientset().CoreV1().Secrets(ns).Create(ctx, secret(map[string][]byte{"hs256.keys": []byte(s1), "jwks.pem": pub}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "Secret " + ns + "/" + secretName

	src := jwtkube.NewSecret(env.Clientset(), ns, secretName, jwtkube.WithHMACSecretsKey("hs256.keys"), jwtkube.WithVerificationKeysKey("jwks.pem"))
	c, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.SigningKey.Present() || c.HMACSecrets.Name != name+" key hs256.keys" || c.VerificationKeys.Name != name+" key jwks.pem" {
		t.Fatalf("content %+v", c)
	}
	m, err := jwtkeys.Validate(c)
	if err != nil || m.Algorithm() != jwtkeys.HS256 || len(m.Keys()) != 2 {
		t.Fatalf("validate: %v", err)
	}

	// The default layout, signing key absent: an error naming the key.
	_, err = jwtkube.NewSecret(env.Clientset(), ns, secretName).Read(ctx)
	if hotcert.ReasonOf(err) != hotcert.ReasonMissing || !strings.Contains(err.Error(), "key signing.key") {
		t.Fatalf("missing signing.key: %v", err)
	}
	// verify.pem is optional.
	if _, err := jwtkube.NewSecret(env.Clientset(), ns, secretName, jwtkube.WithSigningKeyKey("jwks.pem")).Read(ctx); err != nil {
		t.Fatalf("optional verify.pem: %v", err)
	}
}

// The RBAC of the package documentation is enough: get, list and watch on the one
// Secret by resourceName (the informer lists and watches with a name field selector).
func TestSecretWithMinimalRBAC(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.NewNamespace(t)
	secrets := env.Clientset().CoreV1().Secrets(ns)
	a, _, kidA := genKey(t, jwtkeys.ES256)
	b, pubB, kidB := genKey(t, jwtkeys.ES256)
	if _, err := secrets.Create(ctx, secret(map[string][]byte{"signing.key": a}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := env.NewRestrictedConfig(t, "token-keys-reader-"+ns, []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{secretName}, Verbs: []string{"get", "list", "watch"},
	}}, ns)
	restricted, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restricted.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("the restricted user can list every Secret: the test proves nothing")
	}
	logs := &testutil.LogBuffer{}
	ks := startKeySet(t, jwtkube.NewSecret(restricted, ns, secretName), logs)
	if ks.SigningKeyID() != kidA {
		t.Fatal("initial key")
	}
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": b, "verify.pem": pubB}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the rotation through the restricted informer", func() bool { return ks.SigningKeyID() == kidB })
	if logs.Count("JWT signing key reload failed") != 0 || strings.Contains(logs.String(), "forbidden") {
		t.Fatalf("failures with minimal RBAC:\n%s", logs)
	}
}

// A Secret that does not exist yet: WithInitialWait lets New wait for it.
func TestSecretCreatedAfterStart(t *testing.T) {
	ctx := ctxFor(t)
	ns := env.NewNamespace(t)
	a, _, kidA := genKey(t, jwtkeys.ES256)
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = env.Clientset().CoreV1().Secrets(ns).Create(ctx, secret(map[string][]byte{"signing.key": a}), metav1.CreateOptions{})
	}()
	ks := startKeySet(t, jwtkube.NewSecret(env.Clientset(), ns, secretName), &testutil.LogBuffer{}, hotcert.WithInitialWait(30*time.Second))
	if ks.SigningKeyID() != kidA {
		t.Fatalf("signing kid %s, want %s", ks.SigningKeyID(), kidA)
	}

	// Without the wait, a missing Secret is an error at once, naming it.
	_, err := jwtkeys.New(ctx, jwtkube.NewSecret(env.Clientset(), ns, "missing"))
	if err == nil || !strings.Contains(err.Error(), ns+"/missing") {
		t.Fatalf("New over a missing Secret: %v", err)
	}
}
