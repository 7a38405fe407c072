package jwtkeys

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
)

// The fuzz targets use fixed keys, so the tokens of the checked-in corpus
// (testdata/fuzz) verify in every run and mutations start from real tokens.
var (
	fuzzNow        = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	fuzzEd25519    = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	fuzzHMACSecret = bytes.Repeat([]byte("fuzz-hmac-secret"), 3) // 48 bytes
)

func fuzzECKey(tb testing.TB) *ecdsa.PrivateKey {
	d := new(big.Int).SetBytes(sha256.New().Sum([]byte("hotcert jwtkeys fuzz P-256 key")))
	d.Mod(d, elliptic.P256().Params().N)
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), d.FillBytes(make([]byte, 32)))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func pemOf(tb testing.TB, typ string, der []byte, err error) []byte {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// fuzzKeySets returns a set signing EdDSA that lists an ES256 key, and an HS256 set.
func fuzzKeySets(tb testing.TB) (asym, sym *KeySet, ec *ecdsa.PrivateKey) {
	tb.Helper()
	ec = fuzzECKey(tb)
	edDER, err := x509.MarshalPKCS8PrivateKey(fuzzEd25519)
	edPEM := pemOf(tb, "PRIVATE KEY", edDER, err)
	ecPubDER, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	ecPub := pemOf(tb, "PUBLIC KEY", ecPubDER, err)
	opts := []Option{WithClock(func() time.Time { return fuzzNow }), WithMaxTokenTTL(24 * time.Hour), hotcert.WithSettle(0), hotcert.WithPollInterval(0)}
	asym, err = New(context.Background(), NewMemorySource(Content{
		SigningKey:       hotcert.Input{Name: "signing.key", Data: edPEM},
		VerificationKeys: hotcert.Input{Name: "verify.pem", Data: ecPub},
	}), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	sym, err = New(context.Background(), NewMemorySource(Content{
		HMACSecrets: hotcert.Input{Name: "hs256.keys", Data: []byte(base64.StdEncoding.EncodeToString(fuzzHMACSecret) + "\n")},
	}), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return asym, sym, ec
}

var knownReasons = map[RejectReason]bool{
	ReasonMalformed: true, ReasonUnknownKey: true, ReasonKeyRetired: true, ReasonAlgorithm: true,
	ReasonSignature: true, ReasonExpired: true, ReasonNotYetValid: true, ReasonClaims: true,
}

// FuzzVerify feeds arbitrary strings to Verify. It must never panic; a rejection
// is a *VerifyError with a known reason whose message holds neither the token nor a
// secret; and a token it accepts must verify, independently of the jwt library, with
// the standard library's crypto and the one key its kid names, under that key's
// algorithm — no forgery, no algorithm confusion, no kid confusion — and carry an exp
// that has not passed. A rejected token leaves the caller's claims untouched.
func FuzzVerify(f *testing.F) {
	asym, sym, ec := fuzzKeySets(f)
	for _, tok := range fuzzTokens(f, asym, sym, ec) {
		f.Add(tok)
	}
	f.Fuzz(func(t *testing.T, token string) {
		for _, ks := range []*KeySet{asym, sym} {
			var claims jwt.RegisteredClaims
			kid, err := ks.VerifyClaims(token, &claims)
			if err != nil {
				var ve *VerifyError
				if !errors.As(err, &ve) || !knownReasons[ve.Reason] {
					t.Fatalf("rejection is not a VerifyError with a known reason: %#v", err)
				}
				if msg := err.Error(); (len(token) >= 16 && strings.Contains(msg, token)) ||
					strings.Contains(msg, string(fuzzHMACSecret)) || strings.Contains(msg, base64.StdEncoding.EncodeToString(fuzzHMACSecret)) {
					t.Fatalf("error message leaks the token or a secret: %s", msg)
				}
				if !reflect.DeepEqual(claims, jwt.RegisteredClaims{}) {
					t.Fatalf("a rejected token filled the claims: %+v", claims)
				}
				continue
			}
			checkAccepted(t, ks, ec, token, kid, &claims)
		}
	})
}

// fuzzTokens returns one good token per key: EdDSA and HS256 from the sets, ES256
// signed by the listed key. Each is checked to verify, so the seeds reach the
// acceptance checks.
func fuzzTokens(tb testing.TB, asym, sym *KeySet, ec *ecdsa.PrivateKey) []string {
	tb.Helper()
	claims := jwt.RegisteredClaims{Subject: "agent-1", IssuedAt: jwt.NewNumericDate(fuzzNow), ExpiresAt: jwt.NewNumericDate(fuzzNow.Add(time.Hour))}
	var toks []string
	for _, ks := range []*KeySet{asym, sym} {
		tok, err := ks.Sign(claims)
		if err != nil {
			tb.Fatal(err)
		}
		toks = append(toks, tok)
	}
	ecTok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	ecTok.Header["kid"] = asym.Info().Keys[1].ID
	s, err := ecTok.SignedString(ec)
	if err != nil {
		tb.Fatal(err)
	}
	toks = append(toks, s)
	for i, tok := range toks {
		if _, err := asym.Verify(tok); err != nil && i != 1 {
			tb.Fatalf("seed %d does not verify: %v", i, err)
		}
	}
	if _, err := sym.Verify(toks[1]); err != nil {
		tb.Fatalf("HS256 seed does not verify: %v", err)
	}
	return toks
}

// checkAccepted verifies an accepted token without the jwt library.
func checkAccepted(t *testing.T, ks *KeySet, ec *ecdsa.PrivateKey, token, kid string, claims *jwt.RegisteredClaims) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("accepted a token of %d parts", len(parts))
	}
	var hdr struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || json.Unmarshal(raw, &hdr) != nil {
		t.Fatalf("accepted a token whose header does not decode: %q", parts[0])
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatalf("accepted a token whose signature does not decode")
	}
	if hdr.Kid != kid {
		t.Fatalf("verified by kid %q, header names %q", kid, hdr.Kid)
	}
	input := []byte(parts[0] + "." + parts[1])
	sum := sha256.Sum256(input)
	info := ks.Info()
	var ok bool
	switch {
	case hdr.Alg == EdDSA && kid == info.Keys[0].ID && info.Algorithm == EdDSA:
		ok = ed25519.Verify(fuzzEd25519.Public().(ed25519.PublicKey), input, sig)
	case hdr.Alg == ES256 && len(info.Keys) > 1 && kid == info.Keys[1].ID && len(sig) == 64:
		ok = ecdsa.Verify(&ec.PublicKey, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	case hdr.Alg == HS256 && kid == info.Keys[0].ID && info.Algorithm == HS256:
		m := hmac.New(sha256.New, fuzzHMACSecret)
		m.Write(input)
		ok = hmac.Equal(m.Sum(nil), sig)
	}
	if !ok {
		t.Fatalf("accepted a token the key its kid names does not verify: alg %q kid %q", hdr.Alg, kid)
	}
	if claims.ExpiresAt == nil || !fuzzNow.Before(claims.ExpiresAt.Add(DefaultClockSkew)) {
		t.Fatalf("accepted a token without a future exp: %+v", claims.ExpiresAt)
	}
}

// FuzzValidate feeds arbitrary key files to Validate, as a signing key with a
// verification list and as an HS256 secret list. It must never panic; a refusal is a
// *hotcert.Error naming the input, whose message holds no 16-character base64 run of
// the input (no key material); accepted content gives the same key IDs when validated again.
func FuzzValidate(f *testing.F) {
	ec := fuzzECKey(f)
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	ecPEM := pemOf(f, "PRIVATE KEY", ecDER, err)
	sec1DER, err := x509.MarshalECPrivateKey(ec)
	sec1PEM := pemOf(f, "EC PRIVATE KEY", sec1DER, err)
	pubDER, err := x509.MarshalPKIXPublicKey(fuzzEd25519.Public())
	edPub := pemOf(f, "PUBLIC KEY", pubDER, err)
	f.Add(ecPEM, edPub)
	f.Add(sec1PEM, []byte{})
	f.Add([]byte(base64.StdEncoding.EncodeToString(fuzzHMACSecret)+"\n# next\n"), edPub)
	f.Fuzz(func(t *testing.T, signingKey, verificationKeys []byte) {
		for _, c := range []Content{
			{SigningKey: hotcert.Input{Name: "signing.key", Data: signingKey}, VerificationKeys: hotcert.Input{Name: "verify.pem", Data: verificationKeys}},
			{HMACSecrets: hotcert.Input{Name: "hs256.keys", Data: signingKey}},
		} {
			m, err := Validate(c)
			if err != nil {
				var he *hotcert.Error
				if !errors.As(err, &he) || he.Reason == "" || !(strings.HasPrefix(he.Input, "signing.key") || strings.HasPrefix(he.Input, "verify.pem") || strings.HasPrefix(he.Input, "hs256.keys")) {
					t.Fatalf("refusal does not name its input with a reason: %#v", err)
				}
				msg := err.Error()
				for _, in := range [][]byte{signingKey, verificationKeys} {
					for i := 0; i+16 <= len(in); i++ {
						if w := in[i : i+16]; isBase64Run(w) && strings.Contains(msg, string(w)) {
							t.Fatalf("error message holds input bytes %q: %s", w, msg)
						}
					}
				}
				continue
			}
			again, err := Validate(c)
			if err != nil || again.SigningKeyID() != m.SigningKeyID() || len(again.Keys()) != len(m.Keys()) {
				t.Fatalf("validating accepted content again: %v", err)
			}
		}
	})
}

// isBase64Run reports whether w is made of base64 characters only, not all the same.
func isBase64Run(w []byte) bool {
	for _, c := range w {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return bytes.Count(w, w[:1]) < len(w)
}
