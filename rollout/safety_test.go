package rollout_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout"
)

func TestCheckTLS(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	other := ca.MustIssue()
	expired := ca.MustIssue(hotcerttest.WithValidity(time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)))
	future := ca.MustIssue(hotcerttest.WithValidity(time.Now().Add(time.Minute), time.Now().Add(24*time.Hour)))
	pubKey := []byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n-----END PUBLIC KEY-----\n")
	ecLeaf := ca.MustIssue()
	sec1Key, err := ecLeaf.KeyPEMWithType(hotcerttest.KeyFormatSEC1)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	cases := []struct {
		name string
		typ  corev1.SecretType
		data map[string][]byte
		bad  []string // keys reported, in any order
		why  string   // substring of the reason
	}{
		{"valid tls secret", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": ca.CertPEM}, nil, ""},
		{"mismatched key", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": other.KeyPEM}, []string{"tls.crt", "tls.key"}, "does not match"},
		{"truncated cert", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": hotcerttest.Truncate(leaf.ChainPEM), "tls.key": leaf.KeyPEM}, []string{"tls.crt", "tls.key"}, "truncated"},
		{"empty tls.crt", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": nil, "tls.key": leaf.KeyPEM}, []string{"tls.crt", "tls.key"}, "empty"},
		{"expired", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": expired.ChainPEM, "tls.key": expired.KeyPEM}, []string{"tls.crt", "tls.key"}, "expired"},
		{"issued a minute ahead (no clock skew tolerance)", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": future.ChainPEM, "tls.key": future.KeyPEM}, []string{"tls.crt", "tls.key"}, "is not valid before"},
		{"text between the blocks of a bundle", "", map[string][]byte{"ca.crt": append(append([]byte("# Issuer: test\n"), ca.CertPEM...), append([]byte("subject=CN=other\n"), hotcerttest.MustNewCA().CertPEM...)...)}, nil, ""},
		{"openssl ecparam -genkey key", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": ecLeaf.ChainPEM, "tls.key": append([]byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"), sec1Key...)}, nil, ""},
		{"empty ca.crt (ACME)", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM, "ca.crt": nil}, nil, ""},
		{"truncated bundle", corev1.SecretTypeOpaque, map[string][]byte{"ca.crt": hotcerttest.Truncate(hotcerttest.BundlePEM(ca, hotcerttest.MustNewCA()))}, []string{"ca.crt"}, "PEM block 2"},
		{"garbage .pem", "", map[string][]byte{"bundle.pem": []byte("not pem")}, []string{"bundle.pem"}, "malformed"},
		{"public key .pem is not checked", "", map[string][]byte{"jwt.pem": pubKey}, nil, ""},
		{"non-TLS keys are not checked", "", map[string][]byte{"config.yaml": []byte("-----BEGIN junk"), "password": []byte("x")}, nil, ""},
		{"generic pair by stem", "", map[string][]byte{"server.crt": leaf.ChainPEM, "server.key": other.KeyPEM}, []string{"server.crt", "server.key"}, "does not match"},
		{"cert.pem + key.pem", "", map[string][]byte{"cert.pem": leaf.ChainPEM, "key.pem": leaf.KeyPEM}, nil, ""},
		{"cert.pem + key.pem mismatched", "", map[string][]byte{"cert.pem": leaf.ChainPEM, "key.pem": other.KeyPEM}, []string{"cert.pem", "key.pem"}, "does not match"},
		{"one key, one leaf", "", map[string][]byte{"identity.crt": leaf.ChainPEM, "private.key": other.KeyPEM, "ca.crt": ca.CertPEM}, []string{"identity.crt", "private.key"}, "does not match"},
		{"combined pem", "", map[string][]byte{"combined.pem": append(append([]byte{}, leaf.ChainPEM...), other.KeyPEM...)}, []string{"combined.pem"}, "does not match"},
		{"combined pem ok", "", map[string][]byte{"combined.pem": append(append([]byte{}, leaf.ChainPEM...), leaf.KeyPEM...)}, nil, ""},
		{"broken lone key", "", map[string][]byte{"client.key": []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")}, []string{"client.key"}, "does not parse"},
		{"empty lone key", "", map[string][]byte{"client.key": nil}, []string{"client.key"}, "empty"},
		{"encrypted lone key passes (no passphrase to check it with)", "", map[string][]byte{"client.key": []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")}, nil, ""},
		{"legacy encrypted lone key passes", "", map[string][]byte{"client.key": []byte("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\nAAAA\n-----END RSA PRIVATE KEY-----\n")}, nil, ""},
		{"encrypted key in a pair is refused", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")}, []string{"tls.crt", "tls.key"}, "is encrypted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := rollout.CheckTLS(tc.typ, "Secret ns/x", tc.data, now)
			if len(got) != len(tc.bad) {
				t.Fatalf("CheckTLS = %v, want problems on %v", got, tc.bad)
			}
			for _, k := range tc.bad {
				err, ok := got[k]
				if !ok {
					t.Fatalf("no problem on %s: %v", k, got)
				}
				if !strings.Contains(err.Error(), tc.why) {
					t.Errorf("%s: %q does not say %q", k, err, tc.why)
				}
				if !strings.Contains(err.Error(), "Secret ns/x key ") {
					t.Errorf("%s: %q does not name its input", k, err)
				}
				if hotcerttest.ContainsKeyMaterial(err.Error(), leaf, other) {
					t.Errorf("%s: error leaks key material", k)
				}
			}
		})
	}
}

// TestNotYetValidIsDeferredNotRefused: a correct pair whose NotBefore is ahead
// is a NotYetValidError carrying when it becomes valid, which Compute lists as
// not yet valid (to defer), not invalid (to refuse); checked at or after its
// NotBefore, it is fine. A pair that would be expired by then is invalid.
func TestNotYetValidIsDeferredNotRefused(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	notBefore := now.Add(3 * time.Second)
	early := ca.MustIssue(hotcerttest.WithValidity(notBefore, now.Add(24*time.Hour)))
	data := map[string][]byte{"tls.crt": early.ChainPEM, "tls.key": early.KeyPEM}

	got := rollout.CheckTLS(corev1.SecretTypeTLS, "Secret ns/x", data, now)
	var nyv *rollout.NotYetValidError
	if !errors.As(got["tls.crt"], &nyv) || !nyv.NotBefore.Equal(notBefore) {
		t.Fatalf("CheckTLS = %v, want a NotYetValidError until %s", got, notBefore)
	}
	if got := rollout.CheckTLS(corev1.SecretTypeTLS, "Secret ns/x", data, notBefore); len(got) != 0 {
		t.Errorf("at its NotBefore: %v", got)
	}

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"}, Type: corev1.SecretTypeTLS, Data: data}
	cfg, err := rollout.Compute("ns", rollout.Refs{keysRef("tls", "tls.crt", "tls.key")}, func(rollout.Kind, string) (*rollout.Object, error) {
		return rollout.SecretObject(s, now), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Invalid) != 0 || len(cfg.NotYetValid) != 2 || !cfg.NotYetValid[0].NotBefore.Equal(notBefore) || cfg.NotYetValid[0].Reason != rollout.ReasonNotYetValid {
		t.Errorf("Compute: invalid %v, not yet valid %v", cfg.Invalid, cfg.NotYetValid)
	}

	// A chain whose intermediate expires before the leaf starts is never
	// valid: refused, not deferred.
	inter := ca.MustNewIntermediate(hotcerttest.WithValidity(now.Add(-time.Hour), now.Add(time.Second)))
	never := inter.MustIssue(hotcerttest.WithValidity(notBefore, now.Add(time.Hour)))
	got = rollout.CheckTLS(corev1.SecretTypeTLS, "Secret ns/x", map[string][]byte{"tls.crt": never.ChainPEM, "tls.key": never.KeyPEM}, now)
	if err := got["tls.crt"]; err == nil || errors.As(err, &nyv) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a chain never valid at once: %v", err)
	}
}
