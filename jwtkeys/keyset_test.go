package jwtkeys

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
)

func TestSignVerifyEachAlgorithm(t *testing.T) {
	secret, _ := GenerateHMACSecret()
	for _, tc := range []struct {
		alg     string
		content func() Content
	}{
		{ES256, func() Content { return signing(newKey(t, ES256, 0)) }},
		{RS256, func() Content { return signing(newKey(t, RS256, 0)) }},
		{EdDSA, func() Content { return signing(newKey(t, EdDSA, 0)) }},
		{HS256, func() Content { return secrets(secret) }},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			f := newFixture(t, tc.content(), WithIssuer("https://cp.example"), WithAudience("agents"))
			tok := f.issue(t, "agent-7")
			parsed, _, err := jwt.NewParser().ParseUnverified(tok, &jwt.RegisteredClaims{})
			if err != nil {
				t.Fatal(err)
			}
			if parsed.Header["alg"] != tc.alg || parsed.Header["kid"] != f.ks.SigningKeyID() || parsed.Header["typ"] != "JWT" {
				t.Fatalf("header %v, want alg %s kid %s", parsed.Header, tc.alg, f.ks.SigningKeyID())
			}
			c := f.mustVerify(t, tok)
			if c.Subject != "agent-7" || c.Issuer != "https://cp.example" || len(c.Audience) != 1 || c.Audience[0] != "agents" || c.ID == "" {
				t.Fatalf("claims %+v", c)
			}
			if !c.ExpiresAt.Equal(f.clock.Now().Add(testTTL)) {
				t.Fatalf("exp %v, want now+ttl", c.ExpiresAt)
			}
			if got := f.ks.Info().Algorithm; got != tc.alg {
				t.Fatalf("Info().Algorithm = %s", got)
			}
		})
	}
}

func TestKeyIDs(t *testing.T) {
	k := newKey(t, ES256, 0)
	b, _ := pem.Decode(k.public)
	sum := sha256.Sum256(b.Bytes) // PKIX DER, as Kubernetes hashes service-account keys
	if want := base64.RawURLEncoding.EncodeToString(sum[:]); k.kid != want {
		t.Fatalf("kid %s, want %s", k.kid, want)
	}
	f := newFixture(t, signing(k))
	if f.ks.SigningKeyID() != k.kid {
		t.Fatalf("SigningKeyID %s, want %s", f.ks.SigningKeyID(), k.kid)
	}

	secret, _ := GenerateHMACSecret()
	raw, _ := base64.StdEncoding.DecodeString(secret)
	kid, err := HMACKeyID(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, base64.RawURLEncoding.EncodeToString(raw)[:16], string(raw)} {
		if strings.Contains(kid, leak) {
			t.Fatalf("HMAC kid %s reveals the secret", kid)
		}
	}
	if rawSum := sha256.Sum256(raw); kid == base64.RawURLEncoding.EncodeToString(rawSum[:]) {
		t.Fatal("HMAC kid is a bare SHA-256 of the secret; want a domain-separated hash")
	}
}

// TestRotationWhileTokensInFlight: tokens issued before a rotation keep verifying
// until they expire; new tokens carry the new kid; nothing issued is ever rejected
// before its own expiry.
func TestRotationWhileTokensInFlight(t *testing.T) {
	a, b, c := newKey(t, ES256, 0), newKey(t, ES256, 1), newKey(t, EdDSA, 0)
	f := newFixture(t, signing(a))
	inFlight := []string{f.issue(t, "early")}
	f.clock.Advance(testTTL - time.Minute)
	lateAt := f.clock.Now()
	inFlight = append(inFlight, f.issue(t, "late")) // issued right before the rotation

	f.set(t, signing(b))
	if f.ks.SigningKeyID() != b.kid {
		t.Fatalf("signing with %s, want %s", f.ks.SigningKeyID(), b.kid)
	}
	for _, tok := range inFlight {
		f.mustVerify(t, tok)
	}
	fresh := f.issue(t, "after")
	if kidOf(t, fresh) != b.kid {
		t.Fatal("a token issued after the rotation is not signed by the new key")
	}
	f.clock.Advance(30 * time.Second)
	f.set(t, signing(c)) // a second rotation inside the first one's grace period
	f.mustVerify(t, inFlight[1])
	f.mustVerify(t, fresh)
	keys := f.ks.Info().Keys
	if len(keys) != 3 || keys[0].ID != c.kid || keys[1].ID != b.kid || keys[2].ID != a.kid ||
		keys[1].State != KeyRetired || keys[2].State != KeyRetired {
		t.Fatalf("keys %+v, want c signing, then b and a retired (newest first)", keys)
	}
	// Each token is accepted until its own expiry plus skew, then rejected as expired.
	f.clock.Advance(lateAt.Add(testTTL + testSkew - time.Second).Sub(f.clock.Now()))
	f.mustVerify(t, inFlight[1])
	f.clock.Advance(time.Second)
	f.mustReject(t, inFlight[1], ReasonExpired)
	if loads, failures, _ := f.obs.counts(); loads != 2 || failures != 0 {
		t.Fatalf("observed %d loads %d failures, want 2 and 0", loads, failures)
	}
	if n := f.logs.Count("JWT signing key rotated"); n != 2 {
		t.Fatalf("%d rotation log lines, want 2:\n%s", n, f.logs)
	}
}

// TestPreviousKeyGracePeriod: a token signed by the previous key is accepted inside
// the grace period and rejected after it, even if its own exp is still ahead (a token
// minted elsewhere with a longer lifetime: the grace period, not the token, decides).
func TestPreviousKeyGracePeriod(t *testing.T) {
	a, b := newKey(t, RS256, 0), newKey(t, RS256, 1)
	f := newFixture(t, signing(a))
	long := handSigned(t, jwt.SigningMethodRS256, a.kid, a.signer, claimsAt(f.clock.Now(), 24*time.Hour))
	f.mustVerify(t, long)

	f.clock.Advance(time.Minute)
	rotatedAt := f.clock.Now()
	f.set(t, signing(b))
	info := f.ks.Info()
	if r := info.Keys[1]; r.ID != a.kid || r.State != KeyRetired || !r.RetiredAt.Equal(rotatedAt) || !r.VerifiesUntil.Equal(rotatedAt.Add(testGrace)) {
		t.Fatalf("retired key %+v, want retired at %v until %v", r, rotatedAt, rotatedAt.Add(testGrace))
	}
	f.clock.Advance(testGrace - time.Nanosecond)
	f.mustVerify(t, long)
	f.clock.Advance(time.Nanosecond)
	f.mustReject(t, long, ReasonKeyRetired)
	if len(f.ks.Info().Keys) != 1 {
		t.Fatalf("keys after grace %+v, want only the signer", f.ks.Info().Keys)
	}
	// A later reload prunes it; its tokens are still refused for what they are.
	f.set(t, signing(b, b))
	f.mustReject(t, long, ReasonKeyRetired)
}

// TestRemovedKeyRejected: a key the source stops listing is rejected at once — no
// grace period: that is how a key is revoked.
func TestRemovedKeyRejected(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	f := newFixture(t, signing(a, b))
	byB := handSigned(t, jwt.SigningMethodES256, b.kid, b.signer, claimsAt(f.clock.Now(), 5*time.Minute))
	f.mustVerify(t, byB)

	f.set(t, signing(a))
	f.mustReject(t, byB, ReasonUnknownKey)
	if !strings.Contains(f.logs.String(), "removed="+b.kid) {
		t.Fatalf("the reload line does not name the removed key:\n%s", f.logs)
	}
	// Putting it back makes it verify again.
	f.set(t, signing(a, b))
	f.mustVerify(t, byB)
}

// TestListedPreviousKey: listing the previous key in verify.pem keeps it verifying
// beyond the grace period (durable across restarts and replicas) until it is removed.
func TestListedPreviousKey(t *testing.T) {
	a, b := newKey(t, EdDSA, 0), newKey(t, EdDSA, 1)
	f := newFixture(t, signing(a))
	byA := handSigned(t, jwt.SigningMethodEdDSA, a.kid, a.signer, claimsAt(f.clock.Now(), 24*time.Hour))
	f.set(t, signing(b, a))
	if k := f.ks.Info().Keys; len(k) != 2 || k[1].ID != a.kid || k[1].State != KeyListed {
		t.Fatalf("keys %+v, want a listed", k)
	}
	f.clock.Advance(2 * testGrace)
	f.mustVerify(t, byA)
	f.set(t, signing(b))
	f.mustReject(t, byA, ReasonUnknownKey)
}

// TestPublishBeforeSigning: the next key is listed (and in the JWKS) before it signs;
// when it starts signing, the previous key enters its grace period.
func TestPublishBeforeSigning(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	f := newFixture(t, signing(a))
	f.set(t, signing(a, b))
	if !strings.Contains(string(f.ks.JWKS()), b.kid) || f.ks.SigningKeyID() != a.kid {
		t.Fatal("the next key is not published, or signs too early")
	}
	if n := f.logs.Count("JWT verification keys reloaded"); n != 1 {
		t.Fatalf("%d verification reload lines, want 1", n)
	}
	byA := f.issue(t, "x")
	f.set(t, signing(b, b)) // the next key signs; verify.pem still lists it: fine
	f.mustVerify(t, byA)
	if k := f.ks.Info().Keys; len(k) != 2 || k[0].ID != b.kid || k[1].ID != a.kid || k[1].State != KeyRetired {
		t.Fatalf("keys %+v", k)
	}
}

func TestRollback(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	f := newFixture(t, signing(a))
	f.set(t, signing(b))
	byB := f.issue(t, "x")
	f.set(t, signing(a))
	f.mustVerify(t, byB)
	if k := f.ks.Info().Keys; len(k) != 2 || k[0].ID != a.kid || k[0].State != KeySigning || k[1].ID != b.kid {
		t.Fatalf("keys %+v, want a signing and b retired", k)
	}
}

// TestBadContentKeepsLastGood: content that does not validate is reported once and
// changes nothing: the last good key set keeps signing and verifying.
func TestBadContentKeepsLastGood(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	f := newFixture(t, signing(a))
	before := f.issue(t, "x")
	bad := signing(b)
	bad.SigningKey.Data = bad.SigningKey.Data[:len(bad.SigningKey.Data)/2]
	f.src.Set(bad)
	for range 3 { // re-reads of the same bad content are reported once
		if err := f.ks.Reload(context.Background()); err == nil {
			t.Fatal("bad content accepted")
		}
	}
	if f.ks.SigningKeyID() != a.kid {
		t.Fatal("bad content replaced the signing key")
	}
	f.mustVerify(t, before)
	f.mustVerify(t, f.issue(t, "y"))
	if _, failures, _ := f.obs.counts(); failures != 1 {
		t.Fatalf("%d failures observed, want 1", failures)
	}
	if n := f.logs.Count("JWT signing key reload failed"); n != 1 {
		t.Fatalf("%d failure lines, want 1:\n%s", n, f.logs)
	}
	if st := f.ks.Status(); st.LastError == nil || st.Failures != 1 {
		t.Fatalf("status %+v", st)
	}
	f.set(t, signing(b))
	if f.ks.SigningKeyID() != b.kid || f.ks.Status().LastError != nil {
		t.Fatal("good content after bad content was not loaded")
	}
}

func TestConfig(t *testing.T) {
	src := NewMemorySource(signing(newKey(t, ES256, 0)))
	for _, opts := range [][]Option{
		{WithMaxTokenTTL(time.Hour), WithClockSkew(time.Minute), WithGracePeriod(time.Hour)},
		{WithMaxTokenTTL(0)},
		{WithClockSkew(-time.Second)},
	} {
		if _, err := New(context.Background(), src, opts...); err == nil {
			t.Errorf("options %d accepted", len(opts))
		}
	}
	ks, err := New(context.Background(), src, WithMaxTokenTTL(time.Hour), WithClockSkew(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Hour + time.Minute + DefaultPropagation; ks.GracePeriod() != want {
		t.Fatalf("default grace %s, want %s", ks.GracePeriod(), want)
	}
	if _, err := ks.Issue("x", time.Hour+time.Second); err == nil {
		t.Fatal("Issue accepted a lifetime above the maximum")
	}
	if _, err := ks.Issue("x", 0); err == nil {
		t.Fatal("Issue accepted a zero lifetime")
	}
	if _, err := ks.Sign(jwt.RegisteredClaims{Subject: "x"}); err == nil {
		t.Fatal("Sign accepted claims without exp")
	}
	if _, err := ks.Sign(jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(time.Now().Add(2 * time.Hour))}); err == nil {
		t.Fatal("Sign accepted an exp beyond the maximum lifetime")
	}
	if _, err := New(context.Background(), NewMemorySource(Content{})); err == nil {
		t.Fatal("empty content accepted at startup")
	}
	// The content's error, once: the input and what is wrong, no "initial load
	// from <source>" naming the file again.
	bad := Content{SigningKey: hotcert.Input{Name: "/keys/signing.key", Data: []byte("garbage")}}
	_, err = New(context.Background(), NewMemorySource(bad))
	if msg := fmt.Sprint(err); !strings.HasPrefix(msg, "jwtkeys: /keys/signing.key: ") || strings.Count(msg, "/keys/signing.key") != 1 {
		t.Fatalf("New with a bad signing key: %q, want jwtkeys: /keys/signing.key: <what is wrong>", msg)
	}
}

// TestSignCustomClaims: Sign and VerifyClaims carry a caller's claim type.
func TestSignCustomClaims(t *testing.T) {
	type agentClaims struct {
		jwt.RegisteredClaims
		Cluster string `json:"cluster"`
	}
	f := newFixture(t, signing(newKey(t, EdDSA, 0)))
	tok, err := f.ks.Sign(agentClaims{RegisteredClaims: claimsAt(f.clock.Now(), time.Minute), Cluster: "eu-1"})
	if err != nil {
		t.Fatal(err)
	}
	var got agentClaims
	kid, err := f.ks.VerifyClaims(tok, &got)
	if err != nil || got.Cluster != "eu-1" || kid != f.ks.SigningKeyID() {
		t.Fatalf("VerifyClaims: %v %+v %s", err, got, kid)
	}
}

func kidOf(t *testing.T, tok string) string {
	t.Helper()
	p, _, err := jwt.NewParser().ParseUnverified(tok, &jwt.RegisteredClaims{})
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := p.Header["kid"].(string)
	return kid
}

// TestRevokeRetiredKey: a key kept only by its grace period is revoked by listing it
// in one reload and removing it in the next.
func TestRevokeRetiredKey(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	f := newFixture(t, signing(a))
	byA := f.issue(t, "x")
	f.set(t, signing(b))
	f.mustVerify(t, byA)
	f.set(t, signing(b, a))
	f.mustVerify(t, byA)
	f.set(t, signing(b))
	f.mustReject(t, byA, ReasonUnknownKey)
}
