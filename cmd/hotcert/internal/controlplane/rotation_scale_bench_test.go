package controlplane_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
)

// BenchmarkScaleRotation renews the server certificate of a control plane replica
// (mTLS, tokens, DrainWindow W, in a child process as in BenchmarkScaleAgents) while
// N agents hold their streams, then, in the same run, restarts the replica on the
// same address for comparison. Agents re-open their stream at once when it ends
// cleanly (a drained connection) and retry with backoff when it fails.
//
// It reports, for the drain and the restart: the peak number of reconnects (TLS
// handshakes completed by agents) in any one second (goal for the drain: ≤ 1.5 × N/W, reported as the multiple
// "-peak-x"), failed stream opens, streams lost with an error (goal for the drain:
// 0 and 0), and how long until every agent held a stream again (for the drain: on
// the new certificate; goal ≤ W plus grace). With HOTCERT_SCALE_TSV=DIR each size
// updates its row of DIR/rotation-scale.tsv.
//
// Sizes as BenchmarkScaleAgents (-short: 100 agents); W is N/200 per second of
// window with a 5 s minimum (1k: 5 s, 5k: 25 s, 10k: 50 s), a rate this 2-core
// machine sustains with the agents in the same run.
func BenchmarkScaleRotation(b *testing.B) {
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if err := raiseNoFile(uint64(n) + 512); err != nil {
				b.Skip(err)
			}
			window := scaleDrainWindow(n)
			var r rotationResult
			for range b.N {
				r = runRotation(b, n, window)
			}
			rate := float64(n) / window.Seconds()
			b.Logf("%d agents, drain window %s (N/W = %.0f/s)\n%-8s %10s %8s %10s %10s %12s\n%-8s %10d %8.2f %10d %10d %12s\n%-8s %10d %8.2f %10d %10d %12s",
				n, window, rate, "", "peak/s", "peak x", "failures", "losses", "all back",
				"drain", r.drain.peak, float64(r.drain.peak)/rate, r.drain.failures, r.drain.losses, r.drain.allBack.Round(time.Millisecond),
				"restart", r.restart.peak, float64(r.restart.peak)/rate, r.restart.failures, r.restart.losses, r.restart.allBack.Round(time.Millisecond))
			b.ReportMetric(window.Seconds(), "window-s")
			for _, p := range []struct {
				name string
				ph   phaseResult
			}{{"drain", r.drain}, {"restart", r.restart}} {
				b.ReportMetric(float64(p.ph.peak), p.name+"-peak/s")
				b.ReportMetric(float64(p.ph.peak)/rate, p.name+"-peak-x")
				b.ReportMetric(float64(p.ph.failures), p.name+"-failures")
				b.ReportMetric(float64(p.ph.losses), p.name+"-losses")
				b.ReportMetric(p.ph.allBack.Seconds(), p.name+"-allback-s")
			}
			cells := map[string]string{"window_s": fmtFloat(window.Seconds(), 0), "n_per_w": fmtFloat(rate, 0)}
			for _, p := range []struct {
				name string
				ph   phaseResult
			}{{"drain", r.drain}, {"restart", r.restart}} {
				cells[p.name+"_peak_per_s"] = strconv.Itoa(p.ph.peak)
				cells[p.name+"_peak_x"] = fmtFloat(float64(p.ph.peak)/rate, 2)
				cells[p.name+"_failures"] = strconv.FormatInt(p.ph.failures, 10)
				cells[p.name+"_losses"] = strconv.FormatInt(p.ph.losses, 10)
				cells[p.name+"_allback_s"] = fmtFloat(p.ph.allBack.Seconds(), 1)
			}
			writeScaleTSV(b, "rotation-scale.tsv", rotationTSVHeader, n, cells)
			if r.drain.failures != 0 || r.drain.losses != 0 {
				b.Errorf("drain: %d failed stream opens and %d lost streams, want 0 (first: %v)", r.drain.failures, r.drain.losses, r.drain.firstErr)
			}
		})
	}
}

// rotationTSVHeader is docs/data/rotation-scale.tsv's.
var rotationTSVHeader = []string{"agents", "window_s", "n_per_w",
	"drain_peak_per_s", "drain_peak_x", "drain_failures", "drain_losses", "drain_allback_s",
	"restart_peak_per_s", "restart_peak_x", "restart_failures", "restart_losses", "restart_allback_s"}

// scaleDrainWindow is the drain window of n agents: N/200 per second with a 5 s
// minimum (1k: 5 s, 5k: 25 s, 10k: 50 s).
func scaleDrainWindow(n int) time.Duration {
	return max(5*time.Second, time.Duration(n)*time.Second/200)
}

// scaleSizes are the agent counts of the scale benchmarks: 1k, 5k, 10k; 100 with
// -short; or the list in HOTCERT_SCALE_AGENTS.
func scaleSizes(b *testing.B) []int {
	sizes := []int{1000, 5000, 10000}
	if testing.Short() {
		sizes = []int{100}
	}
	if v := strings.TrimSpace(os.Getenv("HOTCERT_SCALE_AGENTS")); v != "" {
		sizes = sizes[:0]
		for f := range strings.SplitSeq(v, ",") {
			var n int
			if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
				b.Fatalf("HOTCERT_SCALE_AGENTS=%q: want a comma-separated list of agent counts", v)
			}
			sizes = append(sizes, n)
		}
	}
	return sizes
}

type phaseResult struct {
	peak             int           // reconnects (handshakes) in the busiest second
	reconnects       int           // reconnects in the phase
	lastReconnect    time.Duration // from the phase's start to its last reconnect
	perSecond        []int         // reconnects in each second from the phase's start
	failures, losses int64         // failed stream opens; streams ended by an error
	allBack          time.Duration // until every agent held a stream again (drain: on the new certificate)
	firstErr         error
}

type rotationResult struct{ drain, restart phaseResult }

// rotationAgent is one lightweight agent that keeps its stream open.
type rotationAgent struct {
	id, token string
	cc        *grpc.ClientConn
	serverFP  atomic.Pointer[[32]byte] // the server certificate of the last handshake
	streamFP  atomic.Pointer[[32]byte] // ... when the current stream registered; nil while down
	opens     atomic.Int64
}

// fpCreds records the server certificate of every handshake of one agent.
type fpCreds struct {
	credentials.TransportCredentials
	a   *rotationAgent
	log *openLog
}

func (c *fpCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err == nil {
		if ti, ok := info.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			fp := sha256.Sum256(ti.State.PeerCertificates[0].Raw)
			c.a.serverFP.Store(&fp)
		}
		c.log.reconnected(time.Now())
	}
	return conn, info, err
}

func (c *fpCreds) Clone() credentials.TransportCredentials {
	return &fpCreds{TransportCredentials: c.TransportCredentials.Clone(), a: c.a, log: c.log}
}

// openLog records when agents reconnect (a completed TLS handshake: a new
// connection) and what fails, from the agents' side.
type openLog struct {
	mu               sync.Mutex
	opens            []time.Time // handshakes
	failures, losses atomic.Int64
	firstErr         error // guarded by mu
}

func (l *openLog) reconnected(t time.Time) {
	l.mu.Lock()
	l.opens = append(l.opens, t)
	l.mu.Unlock()
}

func (l *openLog) failed(counter *atomic.Int64, err error) {
	counter.Add(1)
	l.mu.Lock()
	if l.firstErr == nil {
		l.firstErr = err
	}
	l.mu.Unlock()
}

// phase returns the log since its last reset, and resets it.
func (l *openLog) phase(since time.Time) phaseResult {
	l.mu.Lock()
	opens, firstErr := l.opens, l.firstErr
	l.opens, l.firstErr = nil, nil
	l.mu.Unlock()
	var last time.Duration
	var kept []time.Time
	for _, t := range opens {
		if !t.Before(since) {
			kept = append(kept, t)
			last = max(last, t.Sub(since))
		}
	}
	perSecond := countPerSecond(kept, since)
	r := phaseResult{peak: slices.Max(append(perSecond, 0)), reconnects: len(kept), lastReconnect: last, perSecond: perSecond,
		failures: l.failures.Swap(0), losses: l.losses.Swap(0), firstErr: firstErr}
	if r.firstErr == nil {
		r.firstErr = errors.New("none")
	}
	return r
}

// countPerSecond counts the times in each second from since (none before it);
// nothing for a zero since.
func countPerSecond(times []time.Time, since time.Time) []int {
	var out []int
	if since.IsZero() {
		return nil
	}
	for _, t := range times {
		k := int(t.Sub(since) / time.Second)
		for len(out) <= k {
			out = append(out, 0)
		}
		out[k]++
	}
	return out
}

// run keeps the agent's stream open until ctx ends: register, one heartbeat, then
// wait for the stream to end; a clean end (a drained connection) re-opens at once,
// a failure after a short jittered pause (grpc's connection backoff does the rest).
func (a *rotationAgent) run(ctx context.Context, log *openLog) {
	for ctx.Err() == nil {
		err := a.stream(ctx, log)
		a.streamFP.Store(nil)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			time.Sleep(50*time.Millisecond + rand.N(50*time.Millisecond))
		}
	}
}

func (a *rotationAgent) stream(ctx context.Context, log *openLog) error {
	st, err := a.cc.NewStream(ctx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
	if err != nil {
		log.failed(&log.failures, fmt.Errorf("%s: open: %w", a.id, err))
		return err
	}
	if err := agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: a.id}); err != nil {
		log.failed(&log.failures, fmt.Errorf("%s: register: %w", a.id, err))
		return err
	}
	if m, err := agentrpc.Recv(st); err != nil || m.Type != agentrpc.TypeRegistered {
		if ctx.Err() == nil {
			log.failed(&log.failures, fmt.Errorf("%s: register: %v (got %q)", a.id, err, m.Type))
		}
		return fmt.Errorf("register: %v", err)
	}
	a.streamFP.Store(a.serverFP.Load())
	a.opens.Add(1)
	// A send that fails with io.EOF means the stream has ended: its status comes
	// from the next receive (a drained connection ends it cleanly).
	if err := agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeHeartbeat, Seq: 1}); err != nil && !errors.Is(err, io.EOF) {
		log.failed(&log.losses, fmt.Errorf("%s: heartbeat: %w", a.id, err))
		return err
	}
	for {
		if _, err := agentrpc.Recv(st); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the server ended the stream cleanly: re-open it
			}
			if ctx.Err() == nil {
				log.failed(&log.losses, fmt.Errorf("%s: stream: %w", a.id, err))
			}
			return err
		}
	}
}

func runRotation(b *testing.B, n int, window time.Duration) rotationResult {
	b.Helper()
	pki := newScalePKI(b, true)
	env := []string{scaleEnvWindow + "=" + window.String()}
	srv := startScaleServer(b, pki, scaleDrain, n, env...)
	stopped := false
	defer func() {
		if !stopped {
			srv.stop(b)
		}
	}()
	var log openLog
	agents, stopAgents := startRotationAgents(b, srv.addr, pki.clientCreds(b), readTokens(b, pki), &log)
	defer stopAgents()

	// The rotation: a renewed certificate, agents move over within the window.
	leaf := pki.ca.MustIssue()
	newFP := sha256.Sum256(leaf.Cert.Raw)
	start := time.Now()
	pki.serve(b, leaf)
	waitAll(b, "every agent on the renewed certificate", window+5*time.Minute, func() bool {
		for _, a := range agents {
			if fp := a.streamFP.Load(); fp == nil || *fp != newFP {
				return false
			}
		}
		return true
	})
	var r rotationResult
	r.drain = log.phase(start)
	r.drain.allBack = time.Since(start)

	// The restart it replaces: every stream ends at once, the replica comes back
	// on the same address.
	before := make([]int64, n)
	for i, a := range agents {
		before[i] = a.opens.Load()
	}
	start = time.Now()
	srv.stop(b)
	stopped = true
	srv = startScaleServer(b, pki, scaleDrain, n, append(env, scaleEnvAddr+"="+srv.addr)...)
	stopped = false
	waitAll(b, "every agent back after the restart", 10*time.Minute, func() bool {
		for i, a := range agents {
			if a.streamFP.Load() == nil || a.opens.Load() <= before[i] {
				return false
			}
		}
		return true
	})
	r.restart = log.phase(start)
	r.restart.allBack = time.Since(start)
	return r
}

// startRotationAgents connects one agent per token to addr with creds, at most 64
// at a time as BenchmarkScaleAgents does, each keeping its stream open
// (rotationAgent.run) and recording its handshakes in log, and returns once every
// one holds its stream, with no failure. stop ends them.
func startRotationAgents(b *testing.B, addr string, creds credentials.TransportCredentials, tokens []string, log *openLog) (agents []*rotationAgent, stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
		for _, a := range agents {
			a.cc.Close()
		}
	}
	for i, token := range tokens {
		a := &rotationAgent{id: scaleAgentID(i), token: token}
		cc, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(&fpCreds{TransportCredentials: creds, a: a, log: log}),
			grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(jwtkeys.StaticToken(a.token))),
			grpc.WithReadBufferSize(4<<10), grpc.WithWriteBufferSize(4<<10),
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: 20 * time.Second,
			}))
		if err != nil {
			stop()
			b.Fatal(err)
		}
		a.cc = cc
		agents = append(agents, a)
	}
	for i := 0; i < len(agents); i += 64 {
		batch := agents[i:min(i+64, len(agents))]
		for _, a := range batch {
			wg.Go(func() { a.run(ctx, log) })
		}
		deadline := time.Now().Add(5 * time.Minute)
		for !holdStreams(batch) {
			if time.Now().After(deadline) {
				stop()
				b.Fatalf("timed out after 5m0s waiting for agents to connect")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if p := log.phase(time.Time{}); p.failures+p.losses != 0 {
		stop()
		b.Fatalf("initial connect: %d failed stream opens, %d lost streams (first: %v)", p.failures, p.losses, p.firstErr)
	}
	return agents, stop
}

// holdStreams says whether every agent holds a registered stream.
func holdStreams(agents []*rotationAgent) bool {
	for _, a := range agents {
		if a.streamFP.Load() == nil {
			return false
		}
	}
	return true
}

func readTokens(b *testing.B, pki *scalePKI) []string {
	b.Helper()
	data, err := os.ReadFile(filepath.Join(pki.dir, "tokens"))
	if err != nil {
		b.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// waitAll polls cond every 50ms until it holds, failing after limit (testutil.WaitFor
// polls every 2 ms for at most 10 s: too often and too short for 10k agents).
func waitAll(b *testing.B, what string, limit time.Duration, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
