package agent

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotcert/hotcert"
)

// DefaultTrustGuardMax bounds how long the trust guard keeps a CA removed from the
// bundle, when Config.TrustGuardMax is not set.
const DefaultTrustGuardMax = time.Hour

// trustGuard is the agent's trust provider when Config.TrustGuard is set. It hands
// out the bundle the reloader holds, plus, while the bundle no longer holds it, the
// CA that issued the leaf the control plane served at the last handshake: the agent
// does not drop trust in that CA until its control plane serves a leaf from a CA
// the bundle keeps. Keeping is bounded by max (from the moment the bundle first
// lacked the CA), logged when it starts and ends, and never done for a revoked CA.
//
// Current runs on every dial; it takes the lock only while a CA is (or was) kept,
// and builds a new Material only when the bundle or the kept CA changes.
type trustGuard struct {
	log     *slog.Logger
	src     *hotcert.Reloader
	max     time.Duration
	now     func() time.Time
	revoked []hotcert.Fingerprint

	served  atomic.Pointer[servedCA] // the issuer of what the control plane served last
	engaged atomic.Bool              // a CA is kept, or was refused or given up: Current takes the slow path

	mu    sync.Mutex
	since time.Time           // when the bundle first lacked the served CA
	fp    hotcert.Fingerprint // the CA kept (or refused, or given up)
	state string              // keepKept, keepRevoked, keepExpired
	union *keptUnion
}

type servedCA struct {
	cert *x509.Certificate
	fp   hotcert.Fingerprint
}

// keptUnion caches the Material of one bundle plus one kept CA.
type keptUnion struct {
	base *hotcert.Material
	fp   hotcert.Fingerprint
	m    *hotcert.Material
}

const (
	keepKept    = "kept"
	keepRevoked = "revoked"
	keepExpired = "expired"
)

var _ hotcert.Provider = (*trustGuard)(nil)

// Current returns the trust the next handshake verifies the control plane with.
func (g *trustGuard) Current() *hotcert.Material {
	base := g.src.Current()
	s := g.served.Load()
	if s == nil || (!g.engaged.Load() && slices.Contains(base.TrustFingerprints(), s.fp)) {
		return base
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.decide(base, s)
}

func (g *trustGuard) decide(base *hotcert.Material, s *servedCA) *hotcert.Material {
	attrs := []any{"ca_subject", s.cert.Subject.String(), "ca_sha256", s.fp.String(), "max", g.max.String()}
	if slices.Contains(base.TrustFingerprints(), s.fp) {
		if g.state == keepKept {
			g.log.Info("agent trust guard released a CA removed from its bundle: the control plane serves a leaf from a CA the bundle keeps",
				"ca_sha256", g.fp.String())
		}
		g.reset()
		return base
	}
	if g.fp != s.fp || g.state == "" {
		g.reset()
		g.fp, g.since, g.state = s.fp, g.now(), keepKept
		g.engaged.Store(true)
		if slices.Contains(g.revoked, s.fp) {
			g.state = keepRevoked
			g.log.Warn("agent trust guard does not keep a revoked CA removed from its bundle, although the control plane serves a leaf it issued", attrs...)
			return base
		}
		g.log.Warn("agent trust guard keeps trusting a CA removed from its bundle: the control plane still serves a leaf it issued", attrs...)
	}
	switch g.state {
	case keepRevoked, keepExpired:
		return base
	}
	if !g.now().Before(g.since.Add(g.max)) {
		g.state = keepExpired
		g.log.Warn("agent trust guard stopped keeping a CA removed from its bundle: the maximum was reached", attrs...)
		return base
	}
	if u := g.union; u != nil && u.base == base && u.fp == s.fp {
		return u.m
	}
	m, err := unionWith(base, s.cert)
	if err != nil {
		g.log.Error("agent trust guard could not keep a CA removed from its bundle", append(attrs, "error", err.Error())...)
		return base
	}
	g.union = &keptUnion{base: base, fp: s.fp, m: m}
	return m
}

func (g *trustGuard) reset() {
	g.fp, g.since, g.state, g.union = hotcert.Fingerprint{}, time.Time{}, "", nil
	g.engaged.Store(false)
}

// Kept returns the fingerprint of the CA the guard keeps beyond the bundle, if any.
func (g *trustGuard) Kept() (hotcert.Fingerprint, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fp, g.state == keepKept
}

// handshaken notes which CA issued the leaf the control plane served in a
// handshake that verified: the CA of the bundle if a chain reaches one, otherwise
// the kept CA.
func (g *trustGuard) handshaken(cs tls.ConnectionState) {
	if len(cs.PeerCertificates) == 0 {
		return
	}
	base, trust := g.src.Current(), g.Current()
	chains, err := hotcert.VerifyChain(cs.PeerCertificates, x509.VerifyOptions{Roots: trust.TrustPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil || len(chains) == 0 {
		return
	}
	root := chains[0][len(chains[0])-1]
	for _, c := range chains {
		if r := c[len(c)-1]; slices.Contains(base.TrustFingerprints(), hotcert.FingerprintOf(r)) {
			root = r
			break
		}
	}
	g.served.Store(&servedCA{cert: root, fp: hotcert.FingerprintOf(root)})
}

// unionWith returns base's bundle with ca appended, validated as the reloader
// validates a bundle.
func unionWith(base *hotcert.Material, ca *x509.Certificate) (*hotcert.Material, error) {
	b := hotcert.EncodeCertificates(append(slices.Clone(base.TrustCertificates()), ca)...)
	src := base.Source() + " + kept CA"
	m, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: src, Data: b}, Source: src}, hotcert.WithRequireTrust())
	if err != nil {
		return nil, fmt.Errorf("agent: keeping CA %s: %w", ca.Subject, err)
	}
	return m, nil
}
