package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/jwtkeys"
)

// phase is one step of the story.
type phase struct {
	name string
	// moves says how the phase moves agents onto the new material: the graceful
	// reconnect (replicas drain their connections over a window) or a forced
	// reconnect (the demo drops every connection, as a control-plane restart would).
	moves string
	// safe phases must not fail a handshake or drop a stream the demo did not drop.
	safe bool
	run  func(ctx context.Context) error
	// claim is what the summary says a safe phase showed beyond the invariants
	// every safe phase holds ("" when nothing). run checks it and fails when it
	// does not hold (that the botched certificate is never served, Run checks over
	// the whole run).
	claim string
}

// How phases move agents.
const (
	movesDrain          = "graceful drain"
	movesForced         = "forced reconnect"
	movesForcedAndDrain = "forced, then drain"
)

// story is the PKI and the agent-token keys the phases rotate through.
type story struct {
	w       *world
	oldCA   *hotcerttest.CA
	newCA   *hotcerttest.CA
	current *hotcerttest.Leaf // what every replica serves
	signing *jwtKey           // the key agent tokens are signed with
	spread  string            // what the graceful reconnect measured
	// readiness is the verdict of hotcert rotation status the current phase waited
	// for ("" in phases outside the CA rotation).
	readiness string
	tokens    string // what the signing-key rotation measured
}

// jwtKey is an agent-token signing key: its PEM private key (signing.key), its PEM
// public key (a verify.pem entry) and its kid.
type jwtKey struct {
	priv, pub []byte
	kid       string
}

func newJWTKey() (*jwtKey, error) {
	priv, err := jwtkeys.GenerateSigningKey(jwtkeys.ES256)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	pub, kid, err := jwtkeys.PublicKeyPEM(priv)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return &jwtKey{priv: priv, pub: pub, kid: kid}, nil
}

func (s *story) phases() []phase {
	ps := []phase{{name: "renew server certificate", moves: movesDrain, safe: true, run: s.renew}}
	if s.w.cfg.Break == BreakOneStepCA {
		name := "UNSAFE one-step CA swap"
		if s.w.cfg.TrustGuards {
			name += " (trust guards on)"
		}
		ps = append(ps, phase{name: name, moves: movesForced, safe: true, run: s.oneStepSwap})
	} else {
		ps = append(ps,
			phase{name: "CA step 1: union bundle", moves: movesForced, safe: true, run: s.caStep1},
			phase{name: "CA step 2: new-CA certificate", moves: movesDrain, safe: true, run: s.caStep2},
			phase{name: "CA step 3: drop old CA", moves: movesForced, safe: true, run: s.caStep3},
		)
	}
	return append(ps,
		phase{name: "botched rotation refused", moves: movesForcedAndDrain, safe: true, run: s.botched,
			claim: "the botched certificate never served, one log line and one count for it"},
		phase{name: "rotate JWT signing key", moves: movesForced, safe: true, run: s.rotateSigningKey,
			claim: "tokens of the removed signing key refused by every replica"},
		phase{name: "graceful reconnect (drain)", moves: movesDrain, safe: true, run: s.gracefulReconnect,
			claim: "every agent moved by the graceful drain, none dropped"},
	)
}

// rotateSigningKey rotates the key agent tokens are signed with, by the durable
// procedure of docs/jwt-keys.md, while every agent stays connected:
//
//  1. publish the next key in verify.pem: every replica verifies it;
//  2. sign with it, the previous public key listed in verify.pem (an agent that
//     reconnects with a token of the previous key is still accepted): replicas hand
//     every agent a token of the new key with its next heartbeat acknowledgement,
//     over the stream it holds;
//  3. remove the previous key once no agent holds its tokens: its tokens are refused
//     from then on, and a forced reconnect makes every agent re-authenticate, with
//     a token of the new key.
//
// Invariants: no refused token, every agent ends up holding a token of the new key.
func (s *story) rotateSigningKey(ctx context.Context) error {
	w := s.w
	prev := s.signing
	next, err := newJWTKey()
	if err != nil {
		return err
	}
	// A token of the previous key, to show that removing the key revokes it.
	probe, err := w.replicas[0].keys.Issue("demo-probe", tokenTTL)
	if err != nil {
		return fmt.Errorf("issuing a probe token: %w", err)
	}
	everyReplica := func(what string, cond func(*jwtkeys.KeySet) bool) error {
		err := w.waitFor(ctx, func() bool {
			for _, r := range w.replicas {
				if !cond(r.keys) {
					return false
				}
			}
			return true
		})
		if err != nil {
			return fmt.Errorf("replicas did not %s: %w", what, err)
		}
		return nil
	}
	verifies := func(kid string) func(*jwtkeys.KeySet) bool {
		return func(ks *jwtkeys.KeySet) bool {
			for _, k := range ks.Info().Keys {
				if k.ID == kid {
					return true
				}
			}
			return false
		}
	}

	// Step 1: publish the next key.
	w.tl.Mark(MarkKeys, "JWT step 1: publish the next key")
	if err := w.writeKeys(prev, next); err != nil {
		return err
	}
	if err := everyReplica("verify the next key", verifies(next.kid)); err != nil {
		return err
	}

	// Step 2: sign with it; the previous key stays listed.
	w.tl.Mark(MarkKeys, "JWT step 2: sign with the next key")
	start := time.Now()
	connects := w.connectsSnapshot()
	if err := w.writeKeys(next, prev); err != nil {
		return err
	}
	if err := everyReplica("sign with the next key", func(ks *jwtkeys.KeySet) bool { return ks.SigningKeyID() == next.kid }); err != nil {
		return err
	}
	switched := time.Since(start)
	n := len(w.agents)
	if err := w.waitFor(ctx, func() bool { return w.holdingTokensOf(next.kid) == n }); err != nil {
		return fmt.Errorf("only %d of %d agents received a token of the new key: %w", w.holdingTokensOf(next.kid), n, err)
	}
	pushed := time.Since(start)
	onStream := 0 // agents that got it over the stream they had before the rotation
	for i, c := range w.connectsSnapshot() {
		if c == connects[i] {
			onStream++
		}
	}

	// Step 3: remove the previous key.
	w.tl.Mark(MarkKeys, "JWT step 3: remove the previous key")
	if err := w.writeKeys(next); err != nil {
		return err
	}
	if err := everyReplica("drop the previous key", func(ks *jwtkeys.KeySet) bool { return !verifies(prev.kid)(ks) }); err != nil {
		return err
	}
	for _, r := range w.replicas {
		if _, err := r.keys.Verify(probe); jwtkeys.RejectReasonOf(err) != jwtkeys.ReasonUnknownKey {
			return fmt.Errorf("%s still accepts tokens of the removed key (%v)", r.name, err)
		}
	}
	if err := s.reconnectAll(ctx); err != nil { // every agent re-authenticates: with a new-key token
		return err
	}
	if h := w.holdingTokensOf(next.kid); h != n {
		return fmt.Errorf("%d of %d agents hold a token of the new key after the rotation", h, n)
	}
	s.signing = next
	s.tokens = fmt.Sprintf("JWT signing key rotated (kid %s… → %s…): replicas signed with it %s after the write, all %d agents held a token of it after %s (%d over their existing stream), then the previous key was removed and every agent re-authenticated: 0 tokens refused, tokens of the removed key are refused",
		short(prev.kid), short(next.kid), switched.Round(time.Millisecond), n, pushed.Round(time.Millisecond), onStream)
	return nil
}

func short(kid string) string { return kid[:min(8, len(kid))] }

// gracefulReconnect renews the server certificate and lets the replicas move every
// agent onto it by themselves: no forced drop, each connection gets a GOAWAY at a
// random time within the drain window, its stream ends cleanly and the agent
// re-opens it at once. Reconnects arrive at about N/window per second instead of all
// at once as after a restart.
func (s *story) gracefulReconnect(ctx context.Context) error {
	start := time.Now()
	if err := s.renewWithDrain(ctx, s.newCA); err != nil {
		return err
	}
	peak := peakPerSecond(s.w.connectsSince(start))
	window := s.w.drainWindow()
	s.spread = fmt.Sprintf("graceful reconnect: %d agents moved over a %s window, at most %d reconnects in one second (N/window = %.0f/s); a restart reconnects them all at once",
		len(s.w.agents), window, peak, float64(len(s.w.agents))/window.Seconds())
	return nil
}

// peakPerSecond returns the largest number of events in any one-second bucket.
func peakPerSecond(offsets []time.Duration) int {
	buckets := map[time.Duration]int{}
	peak := 0
	for _, o := range offsets {
		k := o / time.Second
		buckets[k]++
		peak = max(peak, buckets[k])
	}
	return peak
}

// renewWithDrain has every replica serve a new certificate of ca and waits until
// their graceful drain moved every agent onto it: each stream ended cleanly by its
// replica once (a GOAWAY at a random time within the drain window), none dropped.
func (s *story) renewWithDrain(ctx context.Context, ca *hotcerttest.CA) error {
	drained, drops := s.w.c.drained.Load(), s.w.c.drops.Load()
	before := s.w.connectsSnapshot()
	s.w.tl.Mark(MarkDrain, fmt.Sprintf("graceful reconnect: each replica moves its agents over a %s window", s.w.drainWindow()))
	if err := s.serveEverywhere(ctx, ca.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	moved := s.w.movedOnto(hotcert.FingerprintOf(s.current.Cert), before)
	if err := s.w.waitFor(ctx, func() bool { return moved() == len(s.w.agents) }); err != nil {
		return fmt.Errorf("only %d of %d agents were moved onto the new certificate: %w", moved(), len(s.w.agents), err)
	}
	// Each agent's stream was drained at least once (a few agents, reconnecting on a
	// busy machine while the swap lands, can be drained a second time: that is a
	// clean end too, and the table shows the count).
	if n := s.w.c.drained.Load() - drained; n < uint64(len(s.w.agents)) {
		return fmt.Errorf("%d streams drained for %d agents, want each at least once", n, len(s.w.agents))
	}
	if d := s.w.c.drops.Load() - drops; d != 0 {
		return fmt.Errorf("%d agent streams dropped during the graceful reconnect, want 0", d)
	}
	return nil
}

// serveEverywhere writes leaf to every replica and waits until all serve it.
func (s *story) serveEverywhere(ctx context.Context, leaf *hotcerttest.Leaf) error {
	s.w.nameCert(leaf)
	for _, r := range s.w.replicas {
		if err := s.w.write(r, leaf.ChainPEM, leaf.KeyPEM); err != nil {
			return err
		}
	}
	fp := hotcert.FingerprintOf(leaf.Cert)
	err := s.w.waitFor(ctx, func() bool {
		for _, r := range s.w.replicas {
			if r.srv.Serving().Current().LeafFingerprint() != fp {
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("replicas did not serve the new certificate: %w", err)
	}
	s.current = leaf
	return nil
}

// reconnectAll forces every agent through a new handshake and waits until all are
// connected again on the certificate the replicas serve.
func (s *story) reconnectAll(ctx context.Context) error {
	before := s.w.connectsSnapshot()
	s.w.dropAll()
	done := s.w.movedOnto(hotcert.FingerprintOf(s.current.Cert), before)
	if err := s.w.waitFor(ctx, func() bool { return done() == len(s.w.agents) }); err != nil {
		return fmt.Errorf("only %d of %d agents reconnected on the served certificate: %w", done(), len(s.w.agents), err)
	}
	return nil
}

// renew: cert-manager renews the server certificate with the same CA. No stream
// drops: established streams keep the certificate they were opened with, and the
// replicas move each agent onto the new one with a graceful drain.
func (s *story) renew(ctx context.Context) error { return s.renewWithDrain(ctx, s.oldCA) }

// caStep1: add the new CA to the agents' bundle; agents re-read it on reconnect.
func (s *story) caStep1(ctx context.Context) error {
	if err := s.w.writeBundle(s.oldCA, s.newCA); err != nil {
		return err
	}
	if err := s.reconnectAll(ctx); err != nil {
		return err
	}
	return s.awaitReadiness(ctx, rotation.StepSwitchServerCert)
}

// caStep2: switch the server certificate to the new CA; every agent trusts both,
// and the replicas move them onto it with a graceful drain.
func (s *story) caStep2(ctx context.Context) error {
	if err := s.renewWithDrain(ctx, s.newCA); err != nil {
		return err
	}
	return s.awaitReadiness(ctx, rotation.StepRemoveOldCA)
}

// caStep3: remove the old CA once every replica serves a new-CA certificate.
func (s *story) caStep3(ctx context.Context) error {
	if err := s.w.writeBundle(s.newCA); err != nil {
		return err
	}
	if err := s.reconnectAll(ctx); err != nil {
		return err
	}
	return s.awaitReadiness(ctx, "")
}

// oneStepSwap is what the runbook forbids: the bundle switches to the new CA while
// the replicas still serve the old one. Reconnecting agents fail verification,
// unless the trust guards are on (guardedSwap).
func (s *story) oneStepSwap(ctx context.Context) error {
	if err := s.w.writeBundle(s.newCA); err != nil {
		return err
	}
	if s.w.cfg.TrustGuards {
		return s.guardedSwap(ctx)
	}
	s.w.dropAll()
	before := s.w.c.handshakeFails.Load()
	// Wait until failures show, then finish the rotation so the story can go on.
	_ = s.w.waitFor(ctx, func() bool { return s.w.c.handshakeFails.Load() > before })
	if err := s.serveEverywhere(ctx, s.newCA.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	return s.reconnectAll(ctx)
}

// guardedSwap finishes the one-step swap with the trust guards on: every agent
// keeps the old CA, whose leaf its replica still serves, across a forced reconnect;
// the replicas serve the new CA's leaf as soon as every agent reports trusting the
// new CA (which the bundle now holds); on their next handshake the agents land on it
// and drop the old CA.
func (s *story) guardedSwap(ctx context.Context) error {
	w := s.w
	oldFP := hotcert.FingerprintOf(s.oldCA.Cert)
	if err := s.reconnectAll(ctx); err != nil {
		return err
	}
	keeping := func(want bool) func() bool {
		return func() bool {
			for _, a := range w.agents {
				if fp, ok := a.KeptCA(); ok != want || (want && fp != oldFP) {
					return false
				}
			}
			return true
		}
	}
	if err := w.waitFor(ctx, keeping(true)); err != nil {
		return fmt.Errorf("the agents' trust guards did not keep the old CA: %w", err)
	}
	if err := s.serveEverywhere(ctx, s.newCA.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	if err := s.reconnectAll(ctx); err != nil {
		return err
	}
	if err := w.waitFor(ctx, keeping(false)); err != nil {
		return fmt.Errorf("the agents kept the old CA after landing on the new CA's leaf: %w", err)
	}
	return s.awaitReadiness(ctx, "")
}

// botched: one replica gets a certificate whose key does not match. It refuses it,
// keeps serving the last good certificate, says so once, and recovers on the next
// good write. Agents never see the botched certificate.
func (s *story) botched(ctx context.Context) error {
	r := s.w.replicas[0]
	bad := s.newCA.MustIssue(serverLeaf()...)
	s.w.nameCert(bad) // if it were ever served, the timeline would show it
	fp := hotcert.FingerprintOf(bad.Cert)
	s.w.botched.Store(&fp)
	failures := r.srv.Certificate().Status().Failures
	lines := s.w.sink.count("TLS certificate reload failed")
	if err := s.w.write(r, bad.ChainPEM, s.current.KeyPEM); err != nil {
		return err
	}
	if err := s.w.waitFor(ctx, func() bool { return r.srv.Certificate().Status().Failures > failures }); err != nil {
		return fmt.Errorf("%s did not refuse the botched certificate: %w", r.name, err)
	}
	s.w.tl.Mark(MarkFailure, r.name+" refused a key that does not match")
	s.w.tl.Refused(s.w.certName(fp), "refused by "+r.name+" (key mismatch)")
	if err := s.reconnectAll(ctx); err != nil { // service goes on, on the last good certificate
		return err
	}
	if n := r.srv.Certificate().Status().Failures - failures; n != 1 {
		return fmt.Errorf("%s counted the botched certificate %d times, want once", r.name, n)
	}
	if n := s.w.sink.count("TLS certificate reload failed") - lines; n != 1 {
		return fmt.Errorf("%d \"TLS certificate reload failed\" lines for one botched certificate, want one", n)
	}
	if v := metricValue(r, "hotcert_tls_reload_failures_total"); v != 1 {
		return fmt.Errorf("%s: hotcert_tls_reload_failures_total = %v, want 1", r.name, v)
	}
	// The fix: the next good write recovers, and the replicas drain agents onto it
	// (after a steady moment, so that the forced reconnect has fully settled).
	s.w.hold(ctx)
	return s.renewWithDrain(ctx, s.newCA)
}

func serverLeaf() []hotcerttest.Option {
	return []hotcerttest.Option{hotcerttest.WithCommonName("control-plane"), hotcerttest.WithLifetime(24 * time.Hour)}
}
