package jwtkeys

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Sign signs claims with the current key: the header names the key ("kid") and its
// pinned algorithm. claims must carry an expiry no later than the maximum token
// lifetime from now, so that the grace period covers every token in flight.
func (ks *KeySet) Sign(claims jwt.Claims) (string, error) {
	exp, err := claims.GetExpirationTime()
	if err != nil {
		return "", fmt.Errorf("jwtkeys: sign: %w", err)
	}
	if exp == nil {
		return "", errors.New("jwtkeys: sign: the claims have no expiry (exp)")
	}
	if limit := ks.cfg.now().Add(ks.cfg.maxTTL); exp.After(limit) {
		return "", fmt.Errorf("jwtkeys: sign: expiry %s is later than the maximum token lifetime %s allows (%s)",
			exp.UTC().Format(time.RFC3339), ks.cfg.maxTTL, limit.UTC().Format(time.RFC3339))
	}
	k := ks.cur.Load().mat.signer
	t := jwt.NewWithClaims(k.method, claims)
	t.Header["kid"] = k.id
	s, err := t.SignedString(k.sign)
	if err != nil {
		return "", fmt.Errorf("jwtkeys: sign with key %s: %w", k.id, err)
	}
	return s, nil
}

// Issue returns a token for subject, signed with the current key, valid from now
// for ttl (at most the maximum token lifetime), with a random jti and the issuer and
// audience the KeySet was configured with.
func (ks *KeySet) Issue(subject string, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", fmt.Errorf("jwtkeys: issue: the lifetime must be positive, got %s", ttl)
	}
	if ttl > ks.cfg.maxTTL {
		return "", fmt.Errorf("jwtkeys: issue: lifetime %s is longer than the maximum token lifetime %s", ttl, ks.cfg.maxTTL)
	}
	var id [16]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	now := ks.cfg.now()
	c := jwt.RegisteredClaims{
		Issuer:    ks.cfg.issuer,
		Subject:   subject,
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		ID:        base64.RawURLEncoding.EncodeToString(id[:]),
	}
	if ks.cfg.audience != "" {
		c.Audience = jwt.ClaimStrings{ks.cfg.audience}
	}
	return ks.Sign(c)
}
