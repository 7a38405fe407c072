package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hotcert/hotcert/hotcerttest"
)

// PhaseResult is what one phase did.
type PhaseResult struct {
	Name            string
	Duration        time.Duration
	Handshakes      uint64 // agent streams opened (each after a full TLS handshake)
	Failures        uint64 // handshakes that failed TLS verification
	Aborted         uint64 // handshakes cut by a connection the demo dropped
	UnexpectedDrops int64  // stream drops the demo did not cause
	Rejected        uint64 // connection attempts refused for the agent's token
	Reloads         uint64 // certificates reloaded by replicas
	BundleReloads   uint64 // CA bundles reloaded by agents
	Refused         uint64 // reloads refused (replicas and agents), the last good material kept
	Moves           string // how agents were moved onto the new material: graceful drain or forced reconnect
	Forced          uint64 // streams the demo dropped on purpose (forced reconnects)
	Drained         uint64 // streams a replica ended cleanly to move its agent (graceful reconnect)
	ReloadP50       time.Duration
	ReloadP99       time.Duration
	// Readiness is the verdict of hotcert rotation status the phase waited for (CA
	// rotation phases only).
	Readiness string
	Err       error
	// Claims are what the phase checked and held, as the summary says it.
	Claims []string
}

// Result is what a demo run did.
type Result struct {
	Phases   []PhaseResult
	Broken   []string // broken invariants; empty when the run is good
	NotRun   []string // phases an interruption left out: nothing was checked in them
	Spread   string   // what the graceful reconnect measured
	Tokens   string   // what the signing-key rotation measured
	Timeline string   // path of the SVG
	Log      string   // path of the servers' and agents' log
}

// Run plays the story. It returns an error naming every broken invariant.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if cfg.Out == "" {
		return nil, errors.New("demo: an output directory is required")
	}
	p := newProgress(cfg.Stdout, cfg.Terminal)
	p.linef("hotcert demo: %d control-plane replicas, %d agents, files in %s", cfg.Replicas, cfg.Agents, cfg.Out)
	p.linef("building a local PKI (two CAs, server certificates) and agent-token signing keys…")

	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("hotcert demo CA 2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("hotcert demo CA 2026"))
	first := oldCA.MustIssue(serverLeaf()...)
	signing, err := newJWTKey()
	if err != nil {
		return nil, err
	}
	p.linef("starting %d replicas and %d agents in this process (gRPC over loopback)…", cfg.Replicas, cfg.Agents)
	w, err := newWorld(cfg, oldCA, first, signing)
	if err != nil {
		return nil, err
	}
	w.nameCA(newCA)
	res := &Result{Timeline: filepath.Join(cfg.Out, "timeline.svg"), Log: filepath.Join(cfg.Out, "demo.log")}
	defer w.close()
	if err := w.writePEM("pki/ca-2026.crt", newCA.CertPEM); err != nil {
		return nil, err
	}

	// Sample the system for the live line and the timeline.
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampler sync.WaitGroup
	phaseName := "connecting agents"
	var phaseMu sync.Mutex
	sampler.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
			n := w.connected()
			w.sample()
			phaseMu.Lock()
			name := phaseName
			phaseMu.Unlock()
			p.status("%-32s agents %4d/%d connected · handshakes %6d ok / %d failed · reloads %d",
				name, n, len(w.agents), w.c.connects.Load(), w.c.handshakeFails.Load(), w.c.reloads.Load())
		}
	})

	s := &story{w: w, oldCA: oldCA, newCA: newCA, current: first, signing: signing}
	w.tl.Mark(MarkPhase, "agents connect")
	if err := w.waitFor(ctx, func() bool { return w.connected() == len(w.agents) }); err != nil {
		res.Broken = append(res.Broken, fmt.Sprintf("only %d of %d agents connected at start", w.connected(), len(w.agents)))
	}
	w.hold(ctx)
	phases := s.phases()
	for _, ph := range phases {
		if ctx.Err() != nil {
			break
		}
		phaseMu.Lock()
		phaseName = ph.name
		phaseMu.Unlock()
		pr := s.play(ctx, ph)
		w.hold(ctx) // a steady state between rotations, visible on the timeline
		if ctx.Err() != nil {
			break // interrupted: the phase did not finish, so nothing of it was checked
		}
		broken := check(ph, &pr)
		res.Phases = append(res.Phases, pr)
		p.linef("%-32s %s", ph.name, verdict(pr))
		if pr.Readiness != "" {
			p.linef("%-32s hotcert rotation status: %s", "", pr.Readiness)
		}
		res.Broken = append(res.Broken, broken...)
	}
	if n := w.c.botchedFPsServed.Load(); n != 0 {
		res.Broken = append(res.Broken, fmt.Sprintf("the botched certificate was served to %d agents", n))
	}
	if n := w.c.tokensRefused.Load(); n != 0 {
		res.Broken = append(res.Broken, fmt.Sprintf("the replicas refused %d agent tokens (want 0)", n))
	}
	stopSampling()
	sampler.Wait()
	p.clear()
	for _, ph := range phases[len(res.Phases):] {
		res.NotRun = append(res.NotRun, ph.name)
	}

	if err := writeTimeline(w.tl, res.Timeline, cfg); err != nil {
		return res, err
	}
	res.Spread, res.Tokens = s.spread, s.tokens
	writeSummary(cfg.Stdout, res, w.latencies())
	if ctx.Err() != nil {
		return res, fmt.Errorf("demo: interrupted: %w", ctx.Err())
	}
	if len(res.Broken) > 0 {
		return res, fmt.Errorf("demo: invariant broken: %s", strings.Join(res.Broken, "; "))
	}
	return res, nil
}

// play runs one phase and measures it.
func (s *story) play(ctx context.Context, ph phase) PhaseResult {
	w := s.w
	w.tl.Mark(MarkPhase, ph.name)
	start := time.Now()
	connects, fails, aborted := w.c.connects.Load(), w.c.handshakeFails.Load(), w.c.aborted.Load()
	drops, forced, reloads := w.c.drops.Load(), w.c.forcedDrops.Load(), w.c.reloads.Load()
	rejected, bundles, refused, drained := w.c.unauthenticated.Load(), w.c.bundleReloads.Load(), w.refusals(), w.c.drained.Load()
	lats := len(w.latencies())
	s.readiness = ""
	err := ph.run(ctx)
	pr := PhaseResult{
		Name:            ph.name,
		Duration:        time.Since(start),
		Handshakes:      w.c.connects.Load() - connects,
		Failures:        w.c.handshakeFails.Load() - fails,
		Aborted:         w.c.aborted.Load() - aborted,
		UnexpectedDrops: int64(w.c.drops.Load()-drops) - int64(w.c.forcedDrops.Load()-forced),
		Reloads:         w.c.reloads.Load() - reloads,
		Rejected:        w.c.unauthenticated.Load() - rejected,
		BundleReloads:   w.c.bundleReloads.Load() - bundles,
		Refused:         w.refusals() - refused,
		Moves:           ph.moves,
		Forced:          w.c.forcedDrops.Load() - forced,
		Drained:         w.c.drained.Load() - drained,
		Readiness:       s.readiness,
		Err:             err,
	}
	if pr.UnexpectedDrops < 0 {
		pr.UnexpectedDrops = 0 // a dropped connection that had no stream yet
	}
	all := w.latencies()
	if phaseLats := all[min(lats, len(all)):]; len(phaseLats) > 0 {
		slices.Sort(phaseLats)
		pr.ReloadP50 = phaseLats[len(phaseLats)/2]
		pr.ReloadP99 = phaseLats[(len(phaseLats)*99)/100]
	}
	return pr
}

func verdict(pr PhaseResult) string {
	if b := brokenIn(pr); len(b) > 0 {
		return "BROKEN: " + strings.Join(b, "; ")
	}
	var moved []string
	if pr.Forced > 0 {
		moved = append(moved, fmt.Sprintf("%d forced reconnects (the demo dropped every connection)", pr.Forced))
	}
	if pr.Drained > 0 || pr.Forced == 0 {
		moved = append(moved, fmt.Sprintf("%d moved by graceful drain", pr.Drained))
	}
	return fmt.Sprintf("ok (%d handshakes, 0 failed, 0 unexpected drops, 0 tokens refused; %s; %s)", pr.Handshakes, strings.Join(moved, ", then "), pr.Duration.Round(10*time.Millisecond))
}

func writeTimeline(tl *Timeline, path string, cfg Config) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	title := fmt.Sprintf("hotcert demo: %d replicas, %d agents", cfg.Replicas, cfg.Agents)
	if err := tl.WriteSVG(f, title); err != nil {
		f.Close()
		return fmt.Errorf("demo: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}
