package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

// phase is one step of the story.
type phase struct {
	name string
	// safe phases must not fail a handshake or drop a stream the demo did not drop.
	safe bool
	run  func(ctx context.Context) error
}

// story is the PKI the phases rotate through.
type story struct {
	w       *world
	oldCA   *hotcerttest.CA
	newCA   *hotcerttest.CA
	current *hotcerttest.Leaf // what every replica serves
	spread  string            // what the graceful reconnect measured
}

func (s *story) phases() []phase {
	ps := []phase{{name: "renew server certificate", safe: true, run: s.renew}}
	if s.w.cfg.Break == BreakOneStepCA {
		ps = append(ps, phase{name: "UNSAFE one-step CA swap", safe: true, run: s.oneStepSwap})
	} else {
		ps = append(ps,
			phase{name: "CA step 1: union bundle", safe: true, run: s.caStep1},
			phase{name: "CA step 2: new-CA certificate", safe: true, run: s.caStep2},
			phase{name: "CA step 3: drop old CA", safe: true, run: s.caStep3},
		)
	}
	return append(ps,
		phase{name: "botched rotation refused", safe: true, run: s.botched},
		phase{name: "graceful reconnect (drain)", safe: true, run: s.gracefulReconnect},
	)
}

// gracefulReconnect renews the server certificate and lets the replicas move every
// agent onto it by themselves: no forced drop, each connection gets a GOAWAY at a
// random time within the drain window, its stream ends cleanly and the agent
// re-opens it at once. Reconnects arrive at about N/window per second instead of all
// at once as after a restart.
func (s *story) gracefulReconnect(ctx context.Context) error {
	start := time.Now()
	drained := s.w.c.drained.Load()
	before := s.w.connectsSnapshot()
	if err := s.serveEverywhere(ctx, s.newCA.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	fp := hotcert.FingerprintOf(s.current.Cert)
	moved := s.w.movedOnto(fp, before)
	if err := s.w.waitFor(ctx, func() bool { return moved() == len(s.w.agents) }); err != nil {
		return fmt.Errorf("only %d of %d agents were moved onto the new certificate: %w", moved(), len(s.w.agents), err)
	}
	if n := s.w.c.drained.Load() - drained; n != uint64(len(s.w.agents)) {
		return fmt.Errorf("%d streams drained for %d agents, want each once", n, len(s.w.agents))
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

// serveEverywhere writes leaf to every replica and waits until all serve it.
func (s *story) serveEverywhere(ctx context.Context, leaf *hotcerttest.Leaf) error {
	for _, r := range s.w.replicas {
		if err := s.w.write(r, leaf.ChainPEM, leaf.KeyPEM); err != nil {
			return err
		}
	}
	fp := hotcert.FingerprintOf(leaf.Cert)
	err := s.w.waitFor(ctx, func() bool {
		for _, r := range s.w.replicas {
			if r.srv.Certificate().Current().LeafFingerprint() != fp {
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

// renew: cert-manager renews the server certificate with the same CA. Streams stay up
// (they keep the old certificate); new connections get the new one.
func (s *story) renew(ctx context.Context) error {
	drops := s.w.c.drops.Load()
	if err := s.serveEverywhere(ctx, s.oldCA.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	if d := s.w.c.drops.Load() - drops; d != 0 {
		return fmt.Errorf("%d agent streams dropped by the renewal itself", d)
	}
	if n := s.w.connected(); n != len(s.w.agents) {
		return fmt.Errorf("%d of %d agents connected after the renewal", n, len(s.w.agents))
	}
	return s.reconnectAll(ctx)
}

// caStep1: add the new CA to the agents' bundle; agents re-read it on reconnect.
func (s *story) caStep1(ctx context.Context) error {
	if err := s.w.writeBundle(s.oldCA, s.newCA); err != nil {
		return err
	}
	return s.reconnectAll(ctx)
}

// caStep2: switch the server certificate to the new CA; every agent trusts both.
func (s *story) caStep2(ctx context.Context) error {
	if err := s.serveEverywhere(ctx, s.newCA.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	return s.reconnectAll(ctx)
}

// caStep3: remove the old CA once every replica serves a new-CA certificate.
func (s *story) caStep3(ctx context.Context) error {
	if err := s.w.writeBundle(s.newCA); err != nil {
		return err
	}
	return s.reconnectAll(ctx)
}

// oneStepSwap is what the runbook forbids: the bundle switches to the new CA while
// the replicas still serve the old one. Reconnecting agents fail verification.
func (s *story) oneStepSwap(ctx context.Context) error {
	if err := s.w.writeBundle(s.newCA); err != nil {
		return err
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

// botched: one replica gets a certificate whose key does not match. It refuses it,
// keeps serving the last good certificate, says so once, and recovers on the next
// good write. Agents never see the botched certificate.
func (s *story) botched(ctx context.Context) error {
	r := s.w.replicas[0]
	bad := s.newCA.MustIssue(serverLeaf()...)
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
	// The fix: the next good write recovers.
	if err := s.serveEverywhere(ctx, s.newCA.MustIssue(serverLeaf()...)); err != nil {
		return err
	}
	return s.reconnectAll(ctx)
}

func serverLeaf() []hotcerttest.Option {
	return []hotcerttest.Option{hotcerttest.WithCommonName("control-plane"), hotcerttest.WithLifetime(24 * time.Hour)}
}
