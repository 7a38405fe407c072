package jwtkeys

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v5"
)

// TestJWKS: the document holds every public key that verifies, is updated on
// rotation and when a retired key leaves its grace period, and lets a verifier in
// another process check tokens with nothing but the document.
func TestJWKS(t *testing.T) {
	a, b, next := newKey(t, ES256, 0), newKey(t, RS256, 0), newKey(t, EdDSA, 0)
	f := newFixture(t, signing(a))
	kids := func() []string {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(f.ks.JWKS(), &set); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range set.Keys {
			if !k.IsPublic() || !k.Valid() || k.Use != "sig" {
				t.Fatalf("bad JWK %+v", k)
			}
			out = append(out, k.KeyID+":"+k.Algorithm)
		}
		return out
	}
	want := func(w ...string) {
		t.Helper()
		if got := strings.Join(kids(), " "); got != strings.Join(w, " ") {
			t.Fatalf("JWKS kids %q, want %q", got, strings.Join(w, " "))
		}
	}
	want(a.kid + ":ES256")
	tokA := f.issue(t, "x")

	f.set(t, signing(b, next)) // rotate to b, publish next
	want(b.kid+":RS256", next.kid+":EdDSA", a.kid+":ES256")
	tokB := f.issue(t, "y")

	// A verifier in another process: only the JWKS document and the jwt library.
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(f.ks.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{tokA, tokB} {
		_, err := jwt.Parse(tok, func(tk *jwt.Token) (any, error) {
			keys := set.Key(tk.Header["kid"].(string))
			if len(keys) != 1 || keys[0].Algorithm != tk.Method.Alg() {
				t.Fatalf("no JWK for kid %v alg %s", tk.Header["kid"], tk.Method.Alg())
			}
			return keys[0].Key, nil
		}, jwt.WithTimeFunc(f.clock.Now))
		if err != nil {
			t.Fatalf("external verification: %v", err)
		}
	}

	f.clock.Advance(testGrace)
	want(b.kid+":RS256", next.kid+":EdDSA") // a's grace ended
	if leaks(string(f.ks.JWKS()), a.private, b.private, next.private) || strings.Contains(string(f.ks.JWKS()), `"d"`) {
		t.Fatal("the JWKS holds private key material")
	}
}

func TestJWKSHandler(t *testing.T) {
	a, b := newKey(t, ES256, 0), newKey(t, ES256, 1)
	f := newFixture(t, signing(a), WithJWKSMaxAge(90*time.Second))
	srv := httptest.NewServer(f.ks.JWKSHandler())
	defer srv.Close()
	get := func(method, etag string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL, nil)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	r := get(http.MethodGet, "")
	etag := r.Header.Get("ETag")
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "application/jwk-set+json" ||
		r.Header.Get("Cache-Control") != "public, max-age=90" || etag == "" {
		t.Fatalf("GET: %d %v", r.StatusCode, r.Header)
	}
	if r := get(http.MethodGet, etag); r.StatusCode != http.StatusNotModified {
		t.Fatalf("conditional GET: %d, want 304", r.StatusCode)
	}
	if r := get(http.MethodHead, ""); r.StatusCode != 200 || r.Header.Get("ETag") != etag {
		t.Fatalf("HEAD: %d", r.StatusCode)
	}
	if r := get(http.MethodPost, ""); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", r.StatusCode)
	}
	f.set(t, signing(b))
	if r := get(http.MethodGet, etag); r.StatusCode != 200 || r.Header.Get("ETag") == etag {
		t.Fatalf("after rotation: %d etag %s (was %s)", r.StatusCode, r.Header.Get("ETag"), etag)
	}
}
