package jwtkeys

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// RejectReason classifies why a token was rejected. It is stable and safe to use as a
// metric label.
type RejectReason string

// Reasons returned in [VerifyError.Reason].
const (
	ReasonMalformed   RejectReason = "malformed"     // not a compact JWS with JSON header and claims, too large, or unsupported header
	ReasonUnknownKey  RejectReason = "unknown_key"   // no kid, or a kid the set does not hold (never held, or removed)
	ReasonKeyRetired  RejectReason = "key_retired"   // signed by a retired key whose grace period has ended
	ReasonAlgorithm   RejectReason = "algorithm"     // the alg header is not the algorithm pinned to the key (or "none")
	ReasonSignature   RejectReason = "signature"     // the signature does not verify: tampered, or signed by another key
	ReasonExpired     RejectReason = "expired"       // exp is past (beyond the clock skew)
	ReasonNotYetValid RejectReason = "not_yet_valid" // nbf or iat is in the future (beyond the clock skew)
	ReasonClaims      RejectReason = "claims"        // exp missing, or wrong issuer or audience
)

// RejectReasons returns every [RejectReason], in a fixed order: for a metric that
// creates one series per reason at zero, so that an alert on increase() sees the
// first rejection of each kind.
func RejectReasons() []RejectReason {
	return []RejectReason{ReasonMalformed, ReasonUnknownKey, ReasonKeyRetired, ReasonAlgorithm,
		ReasonSignature, ReasonExpired, ReasonNotYetValid, ReasonClaims}
}

// MaxTokenSize caps the tokens Verify looks at (bytes). Real tokens are a few hundred.
const MaxTokenSize = 16 << 10

// VerifyError is returned for a rejected token. Its message names the reason and,
// when known, the kid; it never contains the token or its signature.
type VerifyError struct {
	Reason RejectReason
	// KeyID is the token's kid, if it had one.
	KeyID string
	Err   error
}

func (e *VerifyError) Error() string {
	msg := "jwtkeys: token rejected (" + string(e.Reason) + ")"
	if e.KeyID != "" {
		msg += " kid " + e.KeyID
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *VerifyError) Unwrap() error { return e.Err }

// RejectReasonOf returns why a token was rejected: the Reason of the first
// *VerifyError in err's chain, or "" for an error that is not a rejection (nil
// included). It is not hotcert.ReasonOf, which classifies why content failed to
// load.
func RejectReasonOf(err error) RejectReason {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return ""
}

// Verify checks token and returns its registered claims. The token's kid selects the
// key; the key's pinned algorithm must match the alg header; the key must verify at
// this moment (the signer, a listed key, or a retired key inside its grace period);
// exp is required; exp, nbf and iat are checked with the clock skew as leeway; and
// the issuer and audience, when configured, must match. Any failure is a
// *VerifyError.
func (ks *KeySet) Verify(token string) (*jwt.RegisteredClaims, error) {
	c := new(jwt.RegisteredClaims)
	if _, err := ks.VerifyClaims(token, c); err != nil {
		return nil, err
	}
	return c, nil
}

// VerifyClaims is Verify for a claims type of the caller's (typically a struct that
// embeds jwt.RegisteredClaims, passed as a pointer, or a jwt.MapClaims). It returns
// the kid of the key that verified the token. claims is filled only when the token
// verified: a rejected token leaves it as it was, so nothing unverified can be
// mistaken for a verified claim.
func (ks *KeySet) VerifyClaims(token string, claims jwt.Claims) (keyID string, err error) {
	scratch, commit, err := scratchClaims(claims)
	if err == nil {
		keyID, err = ks.verify(token, scratch)
	}
	if err != nil {
		ks.cfg.observer.ObserveVerify(ks.cfg.reload.Component, RejectReasonOf(err))
		return "", err
	}
	commit()
	ks.cfg.observer.ObserveVerify(ks.cfg.reload.Component, "")
	return keyID, nil
}

// scratchClaims returns a zero value of claims' type for a token to be parsed into,
// and the function that copies it into claims once the token verified.
func scratchClaims(claims jwt.Claims) (jwt.Claims, func(), error) {
	v := reflect.ValueOf(claims)
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil():
		fresh := reflect.New(v.Elem().Type())
		if c, ok := fresh.Interface().(jwt.Claims); ok {
			return c, func() { v.Elem().Set(fresh.Elem()) }, nil
		}
	case v.Kind() == reflect.Map && !v.IsNil():
		fresh := reflect.MakeMap(v.Type())
		if c, ok := fresh.Interface().(jwt.Claims); ok {
			return c, func() {
				for it := fresh.MapRange(); it.Next(); {
					v.SetMapIndex(it.Key(), it.Value())
				}
			}, nil
		}
	}
	return nil, nil, &VerifyError{Reason: ReasonClaims, Err: fmt.Errorf("claims of type %T cannot be filled: pass a non-nil pointer or map", claims)}
}

func (ks *KeySet) verify(token string, claims jwt.Claims) (string, error) {
	if len(token) > MaxTokenSize {
		return "", &VerifyError{Reason: ReasonMalformed, Err: fmt.Errorf("token of %d bytes exceeds %d", len(token), MaxTokenSize)}
	}
	st := ks.cur.Load()
	now := ks.cfg.now()
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(st.algs), // never "none"; the key's own algorithm is checked below
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(ks.cfg.skew),
		jwt.WithTimeFunc(ks.cfg.now),
		jwt.WithStrictDecoding(),
	}
	if ks.cfg.issuer != "" {
		opts = append(opts, jwt.WithIssuer(ks.cfg.issuer))
	}
	if ks.cfg.audience != "" {
		opts = append(opts, jwt.WithAudience(ks.cfg.audience))
	}
	var (
		kid      string
		selected bool
	)
	_, err := jwt.NewParser(opts...).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		selected = true
		if _, ok := t.Header["crit"]; ok {
			return nil, &VerifyError{Reason: ReasonMalformed, Err: errors.New(`unsupported "crit" header`)}
		}
		id, ok := t.Header["kid"].(string)
		if !ok || id == "" {
			return nil, &VerifyError{Reason: ReasonUnknownKey, Err: errors.New("no kid header")}
		}
		kid = id
		e, ok := st.byID[id]
		switch {
		case !ok:
			return nil, unheldKey(st, id)
		case e.state == KeyRetired && !now.Before(e.until):
			return nil, graceEnded(id, e.until)
		case t.Method.Alg() != e.k.alg:
			return nil, &VerifyError{Reason: ReasonAlgorithm, KeyID: id, Err: fmt.Errorf("alg %q, but the key is pinned to %s", t.Method.Alg(), e.k.alg)}
		}
		return e.k.verify, nil
	})
	if err == nil {
		return kid, nil
	}
	var ve *VerifyError
	switch {
	case errors.As(err, &ve):
		return "", ve
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "", &VerifyError{Reason: ReasonMalformed, Err: err}
	case (errors.Is(err, jwt.ErrTokenSignatureInvalid) || errors.Is(err, jwt.ErrTokenUnverifiable)) && !selected:
		// Rejected before a key was looked up: the alg is none of the set's (e.g.
		// "none"). A token of a key this set no longer has, whose algorithm no
		// remaining key uses (an ES256 key removed after a move to EdDSA), is
		// reported as what it is: an unknown key.
		if id := removedKeyID(token, st); id != "" {
			return "", unheldKey(st, id)
		}
		return "", &VerifyError{Reason: ReasonAlgorithm, Err: err}
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "", &VerifyError{Reason: ReasonSignature, KeyID: kid, Err: errors.New("signature does not verify")}
	case errors.Is(err, jwt.ErrTokenExpired):
		return "", &VerifyError{Reason: ReasonExpired, KeyID: kid, Err: err}
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "", &VerifyError{Reason: ReasonNotYetValid, KeyID: kid, Err: err}
	default:
		return "", &VerifyError{Reason: ReasonClaims, KeyID: kid, Err: err}
	}
}

// unheldKey is the refusal of a token whose kid st does not hold: key_retired for a
// retired key whose grace period ended (the expiry loop may have pruned it already),
// unknown_key otherwise.
func unheldKey(st *state, id string) *VerifyError {
	if until, ok := st.endedAt[id]; ok {
		return graceEnded(id, until)
	}
	return &VerifyError{Reason: ReasonUnknownKey, KeyID: id, Err: errors.New("no such key (never known, or removed)")}
}

func graceEnded(id string, until time.Time) *VerifyError {
	return &VerifyError{Reason: ReasonKeyRetired, KeyID: id,
		Err: fmt.Errorf("retired key's grace period ended at %s", until.UTC().Format("2006-01-02T15:04:05Z"))}
}

// removedKeyID returns the kid of a token that names, with an algorithm a key
// can be pinned to, a key the set does not have; "" otherwise. It reads the
// header of a token already rejected, only to name the reason.
func removedKeyID(token string, st *state) string {
	t, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return ""
	}
	id, _ := t.Header["kid"].(string)
	if _, known := st.byID[id]; id == "" || known {
		return ""
	}
	switch t.Method.Alg() {
	case ES256, RS256, EdDSA, HS256:
		return id
	}
	return ""
}
