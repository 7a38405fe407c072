package jwtkeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestRejections: tampered tokens, algorithm confusion, unknown or missing kid, and
// bad time or identity claims are all rejected, each with its own reason.
func TestRejections(t *testing.T) {
	ec, rsaKey, ed := newKey(t, ES256, 0), newKey(t, RS256, 0), newKey(t, EdDSA, 0)
	stranger := newKey(t, ES256, 2)
	f := newFixture(t, signing(ec, rsaKey, ed), WithIssuer("cp"), WithAudience("agents"))
	now := f.clock.Now()
	good := f.issue(t, "agent-1")
	f.mustVerify(t, good)
	parts := strings.Split(good, ".")
	valid := func() jwt.RegisteredClaims {
		c := claimsAt(now, time.Minute)
		c.Issuer, c.Audience = "cp", jwt.ClaimStrings{"agents"}
		return c
	}
	ecPub, _ := x509.MarshalPKIXPublicKey(newKeyPublic(t, ec))

	tamperedClaims := func() string {
		raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		m["sub"] = "admin"
		b, _ := json.Marshal(m)
		return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
	}()
	tamperedSig := func() string {
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sig[len(sig)/2] ^= 1
		return parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	}()
	headerSwap := func(alg string) string { // same payload and signature, alg header rewritten
		h, _ := json.Marshal(map[string]string{"alg": alg, "kid": ec.kid, "typ": "JWT"})
		return base64.RawURLEncoding.EncodeToString(h) + "." + parts[1] + "." + parts[2]
	}
	noneToken := func() string {
		c := valid()
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, c)
		tok.Header["kid"] = ec.kid
		s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	noExp := valid()
	noExp.ExpiresAt = nil
	expired := valid()
	expired.IssuedAt, expired.NotBefore = jwt.NewNumericDate(now.Add(-time.Hour)), jwt.NewNumericDate(now.Add(-time.Hour))
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-testSkew - time.Second))
	future := valid()
	future.NotBefore = jwt.NewNumericDate(now.Add(testSkew + time.Minute))
	futureIat := valid()
	futureIat.IssuedAt = jwt.NewNumericDate(now.Add(testSkew + time.Minute))
	wrongIss := valid()
	wrongIss.Issuer = "evil"
	wrongAud := valid()
	wrongAud.Audience = jwt.ClaimStrings{"other"}
	crit := jwt.NewWithClaims(jwt.SigningMethodES256, valid())
	crit.Header["kid"], crit.Header["crit"] = ec.kid, []string{"exp"}
	critTok, _ := crit.SignedString(ec.signer)

	for _, tc := range []struct {
		name string
		tok  string
		want RejectReason
	}{
		{"tampered claims", tamperedClaims, ReasonSignature},
		{"tampered signature", tamperedSig, ReasonSignature},
		{"alg none", noneToken, ReasonAlgorithm},
		{"alg swapped to ES384", headerSwap("ES384"), ReasonAlgorithm},
		{"alg swapped to RS256 (another key's alg)", headerSwap(RS256), ReasonAlgorithm},
		// The classic confusion attack: HS256 "signed" with the public key as the secret.
		{"HS256 with the public key as secret", handSigned(t, jwt.SigningMethodHS256, ec.kid, ecPub, valid()), ReasonAlgorithm},
		{"EdDSA kid with an ES256 signature", handSigned(t, jwt.SigningMethodES256, ed.kid, ec.signer, valid()), ReasonAlgorithm},
		{"unknown kid", handSigned(t, jwt.SigningMethodES256, stranger.kid, stranger.signer, valid()), ReasonUnknownKey},
		{"stranger key with a known kid", handSigned(t, jwt.SigningMethodES256, ec.kid, stranger.signer, valid()), ReasonSignature},
		{"no kid", handSigned(t, jwt.SigningMethodES256, "", ec.signer, valid()), ReasonUnknownKey},
		{"no exp", handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, noExp), ReasonClaims},
		{"expired", handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, expired), ReasonExpired},
		{"not yet valid", handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, future), ReasonNotYetValid},
		{"issued in the future", handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, futureIat), ReasonNotYetValid},
		{"wrong issuer", handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, wrongIss), ReasonClaims},
		{"wrong audience", handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, wrongAud), ReasonClaims},
		{"crit header", critTok, ReasonMalformed},
		{"garbage", "not a token", ReasonMalformed},
		{"empty", "", ReasonMalformed},
		{"padded base64", parts[0] + "=." + parts[1] + "." + parts[2], ReasonMalformed},
		{"oversized", good + strings.Repeat("A", MaxTokenSize), ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.mustReject(t, tc.tok, tc.want)
			_, err := f.ks.Verify(tc.tok)
			if len(tc.tok) > 20 && strings.Contains(err.Error(), tc.tok[len(tc.tok)-20:]) {
				t.Fatalf("error %q contains the token's signature", err)
			}
		})
	}
	// Keys of every algorithm verify their own tokens, side by side.
	for _, k := range []*testKey{rsaKey, ed} {
		f.mustVerify(t, handSigned(t, jwt.GetSigningMethod(k.alg), k.kid, k.signer, valid()))
	}
	if f.obs.verify[ReasonAlgorithm] == 0 || f.obs.verify[""] == 0 {
		t.Fatalf("verifications not observed: %v", f.obs.verify)
	}
}

func newKeyPublic(t *testing.T, k *testKey) any {
	t.Helper()
	m, err := Validate(signing(k))
	if err != nil {
		t.Fatal(err)
	}
	return m.signer.public
}

// A token of a removed key is reported as unknown_key even when no remaining
// key uses its algorithm (the set moved from ES256 to EdDSA), while an
// algorithm no key can be pinned to stays an algorithm rejection.
func TestRemovedKeyOfAnotherAlgorithmIsUnknownKey(t *testing.T) {
	old, ed := newKey(t, ES256, 3), newKey(t, EdDSA, 4)
	f := newFixture(t, signing(ed))
	claims := claimsAt(f.clock.Now(), time.Minute)
	f.mustReject(t, handSigned(t, jwt.SigningMethodES256, old.kid, old.signer, claims), ReasonUnknownKey)
	noneTok := jwt.NewWithClaims(jwt.SigningMethodNone, claims)
	noneTok.Header["kid"] = old.kid
	s, err := noneTok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	f.mustReject(t, s, ReasonAlgorithm)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.mustReject(t, handSigned(t, jwt.SigningMethodES384, old.kid, p384, claims), ReasonAlgorithm)
}

// TestVerifyClaimsFillsOnlyVerifiedClaims: a rejected token — a forged signature,
// an unknown key, an expired token — leaves the caller's claims untouched; a
// verified one fills them.
func TestVerifyClaimsFillsOnlyVerifiedClaims(t *testing.T) {
	type agentClaims struct {
		jwt.RegisteredClaims
		Role string `json:"role"`
	}
	ec, stranger := newKey(t, ES256, 0), newKey(t, ES256, 2)
	f := newFixture(t, signing(ec))
	now := f.clock.Now()
	admin := agentClaims{RegisteredClaims: claimsAt(now, time.Minute), Role: "admin"}
	good := handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, admin)
	parts := strings.Split(good, ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[len(sig)/2] ^= 1
	forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	expired := agentClaims{RegisteredClaims: claimsAt(now.Add(-time.Hour), time.Minute), Role: "admin"}
	early := agentClaims{RegisteredClaims: claimsAt(now.Add(time.Hour), time.Minute), Role: "admin"}
	noExp := admin
	noExp.ExpiresAt = nil

	for name, tok := range map[string]string{
		"forged signature": forged,
		"unknown key":      handSigned(t, jwt.SigningMethodES256, stranger.kid, stranger.signer, admin),
		"expired":          handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, expired),
		"not yet valid":    handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, early),
		"no exp":           handSigned(t, jwt.SigningMethodES256, ec.kid, ec.signer, noExp),
		"alg none":         base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"`+ec.kid+`"}`)) + "." + parts[1] + ".",
		"malformed":        parts[0] + "." + parts[1],
	} {
		// The caller's values, not the zero value: "untouched" is not "reset".
		mine := agentClaims{RegisteredClaims: jwt.RegisteredClaims{Subject: "mine", Issuer: "mine"}, Role: "viewer"}
		c := mine
		if _, err := f.ks.VerifyClaims(tok, &c); err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if !reflect.DeepEqual(c, mine) {
			t.Errorf("%s: rejected token changed the claims: %+v", name, c)
		}
		m := jwt.MapClaims{"kept": true}
		if _, err := f.ks.VerifyClaims(tok, m); err == nil || len(m) != 1 || m["kept"] != true {
			t.Errorf("%s: rejected token changed the map claims: %v", name, m)
		}
	}

	var c agentClaims
	kid, err := f.ks.VerifyClaims(good, &c)
	if err != nil || kid != ec.kid || c.Role != "admin" || c.Subject != "agent-1" {
		t.Fatalf("verified token: kid %q, claims %+v, err %v", kid, c, err)
	}
	m := jwt.MapClaims{}
	if _, err := f.ks.VerifyClaims(good, m); err != nil || m["role"] != "admin" {
		t.Fatalf("verified token into map claims: %v, %v", m, err)
	}
	var nilClaims *agentClaims
	if _, err := f.ks.VerifyClaims(good, nilClaims); RejectReasonOf(err) != ReasonClaims {
		t.Fatalf("nil claims pointer: %v", err)
	}
}

// TestRejectReasonsListsEveryReason: RejectReasons (from which the metrics create a
// series per reason at zero) holds every RejectReason constant declared in the
// package, once.
func TestRejectReasonsListsEveryReason(t *testing.T) {
	declared := map[RejectReason]bool{}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "RejectReason" {
						continue
					}
					for _, v := range vs.Values {
						lit := v.(*ast.BasicLit)
						declared[RejectReason(strings.Trim(lit.Value, `"`))] = true
					}
				}
			}
		}
	}
	listed := map[RejectReason]bool{}
	for _, r := range RejectReasons() {
		if listed[r] || !declared[r] {
			t.Errorf("RejectReasons lists %q twice or without its constant", r)
		}
		listed[r] = true
	}
	if len(declared) < 8 || len(listed) != len(declared) {
		t.Errorf("RejectReasons lists %d reasons, the package declares %d: %v", len(listed), len(declared), declared)
	}
}
