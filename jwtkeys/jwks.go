package jwtkeys

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// jwksDoc is a rendered JWKS with the keys it holds.
type jwksDoc struct {
	kids string // the kids it holds, joined: a doc is reused while they are the same
	body []byte
	etag string
}

// JWKS returns the JSON Web Key Set (RFC 7517) of the public keys that verify now:
// the signing key, the listed keys and the retired keys inside their grace period,
// each with its kid, its pinned alg and "use":"sig". HS256 secrets are never
// published. The document changes on every rotation and when a retired key leaves
// its grace period; verifiers in other processes fetch it (see [KeySet.JWKSHandler]).
func (ks *KeySet) JWKS() []byte { return ks.jwks().body }

func (ks *KeySet) jwks() *jwksDoc {
	st := ks.cur.Load()
	var pub []*key
	var ids []string
	for _, k := range st.verifying(ks.cfg.now()) {
		if !k.symmetric() {
			pub = append(pub, k)
			ids = append(ids, k.id)
		}
	}
	kids := strings.Join(ids, ",")
	if d := st.jwks.Load(); d != nil && d.kids == kids {
		return d
	}
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(pub))}
	for _, k := range pub {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.public, KeyID: k.id, Algorithm: k.alg, Use: "sig"})
	}
	body, err := json.Marshal(set)
	if err != nil {
		// Every key was parsed from PKIX and is of a type go-jose encodes: unreachable.
		panic("jwtkeys: encode JWKS: " + err.Error())
	}
	sum := sha256.Sum256(body)
	d := &jwksDoc{kids: kids, body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`}
	st.jwks.Store(d)
	return d
}

// JWKSHandler serves [KeySet.JWKS] to GET and HEAD requests as
// application/jwk-set+json, with a strong ETag (answering If-None-Match with 304) and
// Cache-Control max-age set by [WithJWKSMaxAge]. Mount it where verifiers expect it,
// e.g. /.well-known/jwks.json.
func (ks *KeySet) JWKSHandler() http.Handler {
	cacheControl := "public, max-age=" + strconv.Itoa(int(ks.cfg.jwksMaxAge/time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		d := ks.jwks()
		h := w.Header()
		h.Set("ETag", d.etag)
		h.Set("Cache-Control", cacheControl)
		if etagMatch(r.Header.Get("If-None-Match"), d.etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/jwk-set+json")
		h.Set("Content-Length", strconv.Itoa(len(d.body)))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(d.body)
	})
}

func etagMatch(header, etag string) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
