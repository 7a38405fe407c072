package jwtkube_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtkube"
)

// The informer machinery (field selector, cache, re-list) is source/kube's and is
// tested there against a real API server; these tests cover the key mapping and the
// KeySet behaviour on Secret updates, with client-go's fake clientset.

func TestMain(m *testing.M) {
	// client-go's fake clientset sends no watch-list bookmark; list+watch instead.
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	os.Exit(m.Run())
}

func secret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cp", Name: "agent-token-keys"}, Data: data}
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

func TestSecretRotation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, _, kidA := genKey(t, jwtkeys.ES256)
	b, pubB, kidB := genKey(t, jwtkeys.EdDSA)
	client := fake.NewClientset(secret(map[string][]byte{"signing.key": a}))
	src := jwtkube.NewSecret(client, "cp", "agent-token-keys")
	if src.String() != "Secret cp/agent-token-keys" {
		t.Fatalf("String() = %q", src.String())
	}
	logs := &testutil.LogBuffer{}
	ks, err := jwtkeys.New(ctx, src, jwtkeys.WithSettle(0), jwtkeys.WithPollInterval(0),
		jwtkeys.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ks.Start(ctx) }()
	defer func() { ks.Close(); <-done }()
	if ks.SigningKeyID() != kidA {
		t.Fatal("initial key")
	}
	tok, _ := ks.Issue("agent", time.Minute)

	secrets := client.CoreV1().Secrets("cp")
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": a, "verify.pem": pubB}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "next key published", func() bool { return strings.Contains(string(ks.JWKS()), kidB) })
	if _, err := secrets.Update(ctx, secret(map[string][]byte{"signing.key": b}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "rotation", func() bool { return ks.SigningKeyID() == kidB })
	if _, err := ks.Verify(tok); err != nil {
		t.Fatalf("token signed before the rotation: %v", err)
	}

	// Deleted Secret: the last good keys keep serving, the failure names the Secret.
	if err := secrets.Delete(ctx, "agent-token-keys", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "failure report", func() bool { return logs.Count("JWT signing key reload failed") == 1 })
	if ks.SigningKeyID() != kidB || !strings.Contains(logs.String(), "Secret cp/agent-token-keys") {
		t.Fatalf("after delete: signing %s; logs:\n%s", ks.SigningKeyID(), logs)
	}
	if _, err := ks.Verify(tok); err != nil {
		t.Fatal(err)
	}
}

func TestSecretKeys(t *testing.T) {
	ctx := context.Background()
	s1, _ := jwtkeys.GenerateHMACSecret()
	_, pub, _ := genKey(t, jwtkeys.ES256)
	client := fake.NewClientset(secret(map[string][]byte{"hs256.keys": []byte(s1), "jwks.pem": pub}))

	src := jwtkube.NewSecret(client, "cp", "agent-token-keys", jwtkube.WithHMACSecretsKey("hs256.keys"), jwtkube.WithVerificationKeysKey("jwks.pem"))
	c, err := src.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.SigningKey.Present() || c.HMACSecrets.Name != "Secret cp/agent-token-keys key hs256.keys" || c.VerificationKeys.Name != "Secret cp/agent-token-keys key jwks.pem" {
		t.Fatalf("content %+v", c)
	}
	m, err := jwtkeys.Validate(c)
	if err != nil || m.Algorithm() != jwtkeys.HS256 || len(m.Keys()) != 2 {
		t.Fatalf("validate: %v", err)
	}

	// The default layout, signing key absent: an error naming the key.
	_, err = jwtkube.NewSecret(client, "cp", "agent-token-keys").Read(ctx)
	if hotcert.ReasonOf(err) != hotcert.ReasonMissing || !strings.Contains(err.Error(), "key signing.key") {
		t.Fatalf("missing signing.key: %v", err)
	}
	// verify.pem is optional.
	if _, err := jwtkube.NewSecret(client, "cp", "agent-token-keys", jwtkube.WithSigningKeyKey("jwks.pem")).Read(ctx); err != nil {
		t.Fatalf("optional verify.pem: %v", err)
	}
}
