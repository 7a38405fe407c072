package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// ReloadLatencies are the phase's server reloads, rename → served, one per
	// replica reload in the order they happened; ReloadP50 and ReloadP99 are their
	// nearest-rank percentiles (of two reloads, the faster and the slower).
	ReloadLatencies []time.Duration
	ReloadP50       time.Duration
	ReloadP99       time.Duration
	// Gaps are how long agents that reconnected in the phase were without a stream
	// (stream end to next registered stream); NotConnectedP50 and NotConnectedMax
	// sum them up.
	Gaps                             []time.Duration
	NotConnectedP50, NotConnectedMax time.Duration
	// CPUWaitP50 and CPUWaitP99 are how long a goroutine due to run waited for a CPU
	// during the phase: from CPUWaitP99 ≥ 50ms on, the phase was bound by the
	// machine's CPU (CPUBound), and so were its times not connected.
	CPUWaitP50, CPUWaitP99 time.Duration
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

// Run plays the story, in named steps: set the world up, sample it for the live
// line and the timeline, wait for the agents to connect, play the phases, check
// what must hold over the whole run, then write the timeline and the summary. It
// returns an error naming every broken invariant.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	if cfg.Out == "" {
		return nil, errors.New("demo: an output directory is required")
	}
	p := newProgress(cfg.Stdout, cfg.Terminal)
	s, err := setUp(cfg, p)
	if err != nil {
		return nil, err
	}
	w := s.w
	res := &Result{Timeline: filepath.Join(cfg.Out, "timeline.svg"), Log: filepath.Join(cfg.Out, "demo.log")}
	defer w.close()
	if err := w.writePEM("pki/ca-2026.crt", s.newCA.CertPEM); err != nil {
		return nil, err
	}
	live := startLiveLine(ctx, w, p)
	s.connectAgents(ctx, res)
	phases := s.phases()
	s.playPhases(ctx, phases, res, p, live)
	res.Broken = append(res.Broken, w.brokenOverall()...)
	live.stop()
	p.clear()
	for _, ph := range phases[len(res.Phases):] {
		res.NotRun = append(res.NotRun, ph.name)
	}
	return s.finish(ctx, cfg, res)
}

// setUp builds the local PKI (two CAs, the first server certificate) and the
// agent-token signing key, and starts the replicas and agents.
func setUp(cfg Config, p *progress) (*story, error) {
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
	return &story{w: w, oldCA: oldCA, newCA: newCA, current: first, signing: signing}, nil
}

// liveLine samples the system every 100ms, for the live line (which names the
// phase being played) and the timeline, until stopped.
type liveLine struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	phase  atomic.Value // string: the phase being played
}

func startLiveLine(ctx context.Context, w *world, p *progress) *liveLine {
	ctx, cancel := context.WithCancel(ctx)
	l := &liveLine{cancel: cancel}
	l.setPhase("connecting agents")
	l.done.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n := w.connected()
			w.sample()
			p.status("%-32s agents %4d/%d connected · handshakes %6d ok / %d failed · reloads %d",
				l.phaseName(), n, len(w.agents), w.c.connects.Load(), w.c.handshakeFails.Load(), w.c.reloads.Load())
		}
	})
	return l
}

func (l *liveLine) setPhase(name string) { l.phase.Store(name) }

func (l *liveLine) phaseName() string { return l.phase.Load().(string) }

// stop ends the sampling and waits for it.
func (l *liveLine) stop() {
	l.cancel()
	l.done.Wait()
}

// connectAgents waits for every agent to connect (a broken invariant if some do
// not), then holds a steady state.
func (s *story) connectAgents(ctx context.Context, res *Result) {
	w := s.w
	w.tl.Mark(MarkPhase, "agents connect")
	if err := w.waitFor(ctx, func() bool { return w.connected() == len(w.agents) }); err != nil {
		res.Broken = append(res.Broken, fmt.Sprintf("only %d of %d agents connected at start", w.connected(), len(w.agents)))
	}
	w.hold(ctx)
}

// playPhases plays the phases in order until ctx is done, then checks each phase
// that finished and prints its verdict.
func (s *story) playPhases(ctx context.Context, phases []phase, res *Result, p *progress, live *liveLine) {
	for _, ph := range phases {
		if ctx.Err() != nil {
			break
		}
		live.setPhase(ph.name)
		pr := s.play(ctx, ph)
		s.w.hold(ctx) // a steady state between rotations, visible on the timeline
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
}

// brokenOverall are the invariants of the whole run that broke: no agent was served
// the botched certificate, no replica refused an agent's token.
func (w *world) brokenOverall() []string {
	var broken []string
	if n := w.c.botchedFPsServed.Load(); n != 0 {
		broken = append(broken, fmt.Sprintf("the botched certificate was served to %d agents", n))
	}
	if n := w.c.tokensRefused.Load(); n != 0 {
		broken = append(broken, fmt.Sprintf("the replicas refused %d agent tokens (want 0)", n))
	}
	return broken
}

// finish writes the timeline and the summary, and returns the run's error: it was
// interrupted, or invariants broke.
func (s *story) finish(ctx context.Context, cfg Config, res *Result) (*Result, error) {
	if err := writeTimeline(s.w.tl, res.Timeline, cfg); err != nil {
		return res, err
	}
	res.Spread, res.Tokens = s.spread, s.tokens
	writeSummary(cfg.Stdout, res)
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
	lats, gaps, cpu := w.reloadLats.mark(), w.gaps.mark(), w.cpu.mark()
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
	pr.ReloadLatencies = w.reloadLats.since(lats)
	pr.ReloadP50, pr.ReloadP99 = percentile(pr.ReloadLatencies, 0.5), percentile(pr.ReloadLatencies, 0.99)
	pr.Gaps = w.gaps.since(gaps)
	pr.NotConnectedP50, pr.NotConnectedMax = percentile(pr.Gaps, 0.5), percentile(pr.Gaps, 1)
	waits := w.cpu.since(cpu)
	pr.CPUWaitP50, pr.CPUWaitP99 = percentile(waits, 0.5), percentile(waits, 0.99)
	return pr
}

// CPUBound reports whether the phase was bound by the machine's CPU: a goroutine
// due to run waited at least 50ms for a core in one probe out of a hundred.
func (pr PhaseResult) CPUBound() bool { return pr.CPUWaitP99 >= cpuBoundWait }

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
