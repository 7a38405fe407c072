package jwtkeys

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestHS256List: the first secret signs, all verify; reordering rotates; a secret
// dropped from the list is rejected at once unless it was the signer (grace).
func TestHS256List(t *testing.T) {
	s1, _ := GenerateHMACSecret()
	s2, _ := GenerateHMACSecret()
	s3, _ := GenerateHMACSecret()
	raw := func(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }
	kid := func(s string) string { k, _ := HMACKeyID(s); return k }

	f := newFixture(t, secrets("# current first", s1, "", s2))
	if f.ks.SigningKeyID() != kid(s1) {
		t.Fatal("the first secret does not sign")
	}
	byS2 := handSigned(t, jwt.SigningMethodHS256, kid(s2), raw(s2), claimsAt(f.clock.Now(), 24*time.Hour))
	f.mustVerify(t, byS2)
	byS1 := f.issue(t, "x")

	// Rotate: the new secret goes first, the old one stays listed.
	f.set(t, secrets(s3, s1))
	f.mustVerify(t, byS1)
	f.mustReject(t, byS2, ReasonUnknownKey) // dropped from the list, never signed: gone at once
	if kidOf(t, f.issue(t, "y")) != kid(s3) {
		t.Fatal("the new first secret does not sign")
	}
	// s1 stopped signing while listed: the listing, not a grace period, kept it.
	// Removing it from the list rejects it at once.
	f.set(t, secrets(s3))
	f.mustReject(t, byS1, ReasonUnknownKey)

	f.set(t, secrets(s1))
	byS3 := handSigned(t, jwt.SigningMethodHS256, kid(s3), raw(s3), claimsAt(f.clock.Now(), 24*time.Hour))
	f.mustVerify(t, byS3) // s3 signed until now: retired with grace
	f.clock.Advance(testGrace)
	f.mustReject(t, byS3, ReasonKeyRetired)

	var jwks struct{ Keys []any }
	if err := jsonUnmarshal(f.ks.JWKS(), &jwks); err != nil || len(jwks.Keys) != 0 {
		t.Fatalf("JWKS of an HS256 set %s: secrets must never be published", f.ks.JWKS())
	}
	for _, s := range []string{s1, s2, s3} {
		if strings.Contains(f.logs.String(), s) || strings.Contains(f.logs.String(), base64.RawURLEncoding.EncodeToString(raw(s))[:16]) {
			t.Fatal("a secret appears in the logs")
		}
	}
}

func TestHS256Invalid(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, MinHMACSecretBytes-1))
	good, _ := GenerateHMACSecret()
	for name, c := range map[string]Content{
		"short":      secrets(good, short),
		"not base64": secrets(good, "not*base64!"),
		"empty":      secrets("# nothing", ""),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Validate(c)
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), good) || strings.Contains(err.Error(), short) {
				t.Fatalf("error %q contains a secret", err)
			}
		})
	}
}

// TestMixedSetAlgorithmPinning: with an HS256 secret signing and an ES256 public key
// listed, a token claiming HS256 under the ES256 key's kid (with the public key as the
// HMAC secret) is rejected by the key's pinned algorithm, not by luck.
func TestMixedSetAlgorithmPinning(t *testing.T) {
	ec := newKey(t, ES256, 0)
	s, _ := GenerateHMACSecret()
	c := secrets(s)
	c.VerificationKeys = signing(ec, ec).VerificationKeys
	f := newFixture(t, c)
	der, _ := x509.MarshalPKIXPublicKey(newKeyPublic(t, ec))
	for _, secret := range [][]byte{der, ec.public} {
		f.mustReject(t, handSigned(t, jwt.SigningMethodHS256, ec.kid, secret, claimsAt(f.clock.Now(), time.Minute)), ReasonAlgorithm)
	}
	f.mustVerify(t, handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, claimsAt(f.clock.Now(), time.Minute)))
	f.mustVerify(t, f.issue(t, "x"))
	// Migrating from HS256 to ES256: the secret retires with its grace period.
	byHMAC := f.issue(t, "y")
	f.set(t, signing(ec))
	f.mustVerify(t, byHMAC)
	if err := f.ks.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
}
