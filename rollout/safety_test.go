package rollout_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

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
		{"issued a minute ahead (clock skew)", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": future.ChainPEM, "tls.key": future.KeyPEM}, nil, ""},
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
