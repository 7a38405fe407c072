package jwtkeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// maxTokenFileSize caps a token file; real tokens are a few hundred bytes.
const maxTokenFileSize = 64 << 10

// NewFileTokenSource returns a TokenSource that reads the token from path on every
// call, like a projected service-account token: whoever renews the file (a kubelet,
// a sidecar, an operator) is picked up by the next RPC, with no watch to lose. The
// file must be a regular file (symlinks are followed, as in a kubelet volume) of at
// most 64 KiB; surrounding whitespace is trimmed.
func NewFileTokenSource(path string) TokenSource {
	return TokenSourceFunc(func(context.Context) (string, error) {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("jwtkeys: token file: %w", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return "", fmt.Errorf("jwtkeys: token file: %w", err)
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("jwtkeys: token file %s is not a regular file", path)
		}
		data, err := io.ReadAll(io.LimitReader(f, maxTokenFileSize+1))
		if err != nil {
			return "", fmt.Errorf("jwtkeys: token file: %w", err)
		}
		if len(data) > maxTokenFileSize {
			return "", fmt.Errorf("jwtkeys: token file %s is larger than %d bytes", path, maxTokenFileSize)
		}
		tok := string(bytes.TrimSpace(data))
		if tok == "" {
			return "", fmt.Errorf("jwtkeys: token file %s is empty", path)
		}
		return tok, nil
	})
}

// StaticToken returns a TokenSource that always returns token.
func StaticToken(token string) TokenSource {
	return TokenSourceFunc(func(context.Context) (string, error) { return token, nil })
}

// DefaultRenewAfter is the fraction of a token's lifetime after which a
// RenewingTokenSource fetches a new one (the kubelet renews projected tokens at 80%).
const DefaultRenewAfter = 0.8

// RenewingTokenSource caches the token of another TokenSource and fetches a new one
// once DefaultRenewAfter of the cached token's lifetime (iat to exp) has passed. If
// fetching fails while the cached token has not expired, the cached token is
// returned. It reads exp and iat without verifying the token: only to schedule
// renewal, never to trust it.
type RenewingTokenSource struct {
	fetch TokenSource
	now   func() time.Time
	after float64

	mu      sync.Mutex
	tok     string
	renewAt time.Time
	exp     time.Time
}

// RenewOption configures a [RenewingTokenSource].
type RenewOption interface{ applyRenew(*RenewingTokenSource) }

type renewOptionFunc func(*RenewingTokenSource)

func (f renewOptionFunc) applyRenew(s *RenewingTokenSource) { f(s) }

// WithRenewAfter sets the fraction (0 < f ≤ 1) of a token's lifetime after which it
// is renewed (default [DefaultRenewAfter]).
func WithRenewAfter(f float64) RenewOption {
	return renewOptionFunc(func(s *RenewingTokenSource) {
		if f > 0 && f <= 1 {
			s.after = f
		}
	})
}

// WithRenewClock sets the clock (default time.Now).
func WithRenewClock(now func() time.Time) RenewOption {
	return renewOptionFunc(func(s *RenewingTokenSource) {
		if now != nil {
			s.now = now
		}
	})
}

// NewRenewingTokenSource returns a caching, renewing view of fetch.
func NewRenewingTokenSource(fetch TokenSource, opts ...RenewOption) *RenewingTokenSource {
	s := &RenewingTokenSource{fetch: fetch, now: time.Now, after: DefaultRenewAfter}
	for _, o := range opts {
		o.applyRenew(s)
	}
	return s
}

// NewIssuingTokenSource returns a RenewingTokenSource over iss.Issue(subject, ttl):
// for a process that holds the KeySet itself (a demo, a test, a service calling its
// own API).
func NewIssuingTokenSource(iss Issuer, subject string, ttl time.Duration, opts ...RenewOption) *RenewingTokenSource {
	return NewRenewingTokenSource(TokenSourceFunc(func(context.Context) (string, error) {
		return iss.Issue(subject, ttl)
	}), opts...)
}

// Token implements [TokenSource].
func (s *RenewingTokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.tok != "" && now.Before(s.renewAt) {
		return s.tok, nil
	}
	tok, err := s.fetch.Token(ctx)
	if err != nil {
		if s.tok != "" && now.Before(s.exp) {
			return s.tok, nil // still valid: renew on a later call
		}
		return "", err
	}
	s.tok, s.renewAt, s.exp = tok, now, now
	var c jwt.RegisteredClaims
	if _, _, perr := jwt.NewParser().ParseUnverified(tok, &c); perr == nil && c.ExpiresAt != nil {
		start := now
		if c.IssuedAt != nil && c.IssuedAt.Before(now) {
			start = c.IssuedAt.Time
		}
		s.exp = c.ExpiresAt.Time
		s.renewAt = start.Add(time.Duration(float64(s.exp.Sub(start)) * s.after))
	}
	return tok, nil
}

// Invalidate drops the cached token, so the next call fetches a new one: call it when
// the server rejected the token (gRPC Unauthenticated), e.g. after a key was revoked.
func (s *RenewingTokenSource) Invalidate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tok, s.renewAt, s.exp = "", time.Time{}, time.Time{}
}

// HeldTokenSource holds the newest token a client was handed — e.g. a renewed token
// the control plane pushes over the agent's stream — and returns it while it has not
// expired; otherwise it returns its fallback's token (e.g. a bootstrap token file).
// Like RenewingTokenSource it reads exp without verifying the token.
type HeldTokenSource struct {
	fallback TokenSource
	now      func() time.Time

	mu  sync.Mutex
	tok string
	exp time.Time // zero: no exp claim, held until replaced
}

// NewHeldTokenSource returns a HeldTokenSource over fallback (nil: none).
// WithRenewClock sets its clock.
func NewHeldTokenSource(fallback TokenSource, opts ...RenewOption) *HeldTokenSource {
	r := NewRenewingTokenSource(nil, opts...)
	return &HeldTokenSource{fallback: fallback, now: r.now}
}

// Set replaces the held token.
func (h *HeldTokenSource) Set(token string) {
	var c jwt.RegisteredClaims
	var exp time.Time
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err == nil && c.ExpiresAt != nil {
		exp = c.ExpiresAt.Time
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tok, h.exp = token, exp
}

// Token implements [TokenSource].
func (h *HeldTokenSource) Token(ctx context.Context) (string, error) {
	h.mu.Lock()
	tok, exp := h.tok, h.exp
	h.mu.Unlock()
	if tok != "" && (exp.IsZero() || h.now().Before(exp)) {
		return tok, nil
	}
	if h.fallback == nil {
		return "", errors.New("jwtkeys: no valid token held and no fallback")
	}
	return h.fallback.Token(ctx)
}

// Invalidate drops the held token (e.g. after the server rejected it).
func (h *HeldTokenSource) Invalidate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tok, h.exp = "", time.Time{}
}
