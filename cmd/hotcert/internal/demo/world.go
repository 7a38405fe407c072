package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
	"github.com/hotcert/hotcert/jwtkeys/jwtmetrics"
	"github.com/hotcert/hotcert/source/file"
)

// replica is one control-plane replica with its kubelet-style Secret volume.
type replica struct {
	name   string
	srv    *controlplane.Server
	keys   *jwtkeys.KeySet // agent-token keys, over the shared key volume
	addr   string
	volume *hotcerttest.AtomicWriter
	// statusURL is its status endpoint (/healthz: its fleet view), read by the
	// readiness checks of the CA phases.
	statusURL string
	reg       *prometheus.Registry

	mu     sync.Mutex
	swapAt time.Time // when the kubelet-style rename happened
}

// counters are totals over the whole run, read per phase as differences.
type counters struct {
	connects         atomic.Uint64 // streams registered by agents (each after a TLS handshake)
	handshakeFails   atomic.Uint64 // TLS handshakes that failed verification, seen by agents
	aborted          atomic.Uint64 // handshakes cut by a dropped connection (not a TLS verdict)
	drops            atomic.Uint64 // established agent streams that ended
	reloads          atomic.Uint64 // certificates reloaded by replicas
	bundleReloads    atomic.Uint64 // CA bundles reloaded by agents
	forcedDrops      atomic.Uint64 // streams the demo dropped on purpose
	drained          atomic.Uint64 // streams a draining replica ended cleanly (asked to reconnect)
	botchedFPsServed atomic.Uint64 // streams that saw a botched certificate
	unauthenticated  atomic.Uint64 // agent connection attempts refused for their token
	tokensRefused    atomic.Uint64 // tokens the replicas refused
}

// world is everything the demo runs.
type world struct {
	cfg      Config
	log      *slog.Logger
	sink     *logSink
	logFile  *os.File
	tl       *Timeline
	c        counters
	caVolume *hotcerttest.AtomicWriter
	// keyVolume is the agent-token key directory (signing.key, verify.pem), one
	// Secret mounted into every replica: any replica verifies any replica's tokens.
	keyVolume *hotcerttest.AtomicWriter
	replicas  []*replica
	agents    []*agent.Agent
	// agentConnects counts each agent's registered streams as the demo saw them
	// (OnEvent), by agent id; built before any agent starts, read-only afterwards.
	agentConnects map[string]*atomic.Uint64
	botched       atomic.Pointer[hotcert.Fingerprint]

	// Measured over the whole run, each phase taking what it measured.
	reloadLats series    // rename → served, of every replica's reloads in the order they happened
	gaps       *gaps     // how long agents were without a stream
	cpu        *cpuProbe // how long a goroutine due to run waited for a CPU

	mu           sync.Mutex
	connectTimes []time.Time                    // when each agent stream was registered
	certNames    map[hotcert.Fingerprint]string // server certificates by the names the timeline shows
	issuerNames  map[hotcert.Fingerprint]string // the issuer's name of each of those certificates
	caNames      map[hotcert.Fingerprint]string // CAs likewise

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// caPath is the agents' ConfigMap volume file.
func (w *world) caPath() string { return filepath.Join(w.caVolume.Dir(), "ca.crt") }

// Agent tokens in the demo: short-lived, so that they are renewed over the streams
// several times during a run and a rotation completes in seconds.
const (
	tokenTTL       = 30 * time.Second
	tokenClockSkew = 2 * time.Second
	// tokenGrace bounds how long a replaced signing key verifies from memory: TTL,
	// skew, and in-process propagation (the demo's durable rotation lists the
	// previous key in verify.pem instead, until it removes it).
	tokenGrace = tokenTTL + tokenClockSkew + 3*time.Second
)

func newWorld(cfg Config, rootCA *hotcerttest.CA, first *hotcerttest.Leaf, signing *jwtKey) (*world, error) {
	logFile, err := os.Create(filepath.Join(cfg.Out, "demo.log"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	w := &world{cfg: cfg, logFile: logFile, tl: NewTimeline(), certNames: map[hotcert.Fingerprint]string{}, issuerNames: map[hotcert.Fingerprint]string{}, caNames: map[hotcert.Fingerprint]string{},
		gaps: newGaps(), cpu: &cpuProbe{period: 10 * time.Millisecond}}
	w.sink = newLogSink(logFile)
	if w.log, err = cfg.NewLogger(w.sink); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("demo: %w", err)
	}
	w.nameCA(rootCA)
	w.nameCert(first)
	if err := w.writePEM("pki/ca-2025.crt", rootCA.CertPEM); err != nil {
		return nil, err
	}

	w.caVolume, err = hotcerttest.NewAtomicWriter(filepath.Join(cfg.Out, "agent-ca"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if _, err := w.caVolume.Write(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(rootCA)}); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	w.keyVolume, err = hotcerttest.NewAtomicWriter(filepath.Join(cfg.Out, "agent-token-keys"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if err := w.writeKeys(signing); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.wg.Go(func() { w.cpu.run(ctx) })
	for i := range cfg.Replicas {
		if err := w.startReplica(ctx, fmt.Sprintf("replica-%d", i), first); err != nil {
			w.close()
			return nil, err
		}
	}
	w.agentConnects = make(map[string]*atomic.Uint64, cfg.Agents)
	for i := range cfg.Agents {
		w.agentConnects[agentID(i)] = new(atomic.Uint64)
	}
	for i := range cfg.Agents {
		if err := w.startAgent(ctx, i); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

func (w *world) writePEM(name string, data []byte) error {
	p := filepath.Join(w.cfg.Out, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

func (w *world) startReplica(ctx context.Context, name string, leaf *hotcerttest.Leaf) error {
	r := &replica{name: name, reg: prometheus.NewRegistry()}
	var err error
	r.volume, err = hotcerttest.NewAtomicWriter(filepath.Join(w.cfg.Out, name, "tls"),
		hotcerttest.WithBeforeSwap(func() { r.mu.Lock(); r.swapAt = time.Now(); r.mu.Unlock() }))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if _, err := r.volume.Write(map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	src, err := file.New(file.WithKeyPair(filepath.Join(r.volume.Dir(), "tls.crt"), filepath.Join(r.volume.Dir(), "tls.key")))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	keySrc, err := jwtfile.New(jwtfile.Dir(w.keyVolume.Dir()), file.WithLogger(w.log))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	rec, err := jwtmetrics.New(r.reg)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	r.keys, err = jwtkeys.New(ctx, keySrc, jwtkeys.WithMaxTokenTTL(tokenTTL), jwtkeys.WithClockSkew(tokenClockSkew),
		jwtkeys.WithGracePeriod(tokenGrace), hotcert.WithSettle(100*time.Millisecond), hotcert.WithPollInterval(time.Second),
		hotcert.WithLogger(w.log.With("replica", name)), jwtkeys.WithObserver(rec))
	if err != nil {
		return fmt.Errorf("demo: %s's agent-token keys: %w", name, err)
	}
	w.wg.Go(func() { _ = r.keys.Start(ctx) })
	r.srv, err = controlplane.New(controlplane.Config{
		TLS:     src,
		Replica: name,
		// Agents authenticate with tokens of the shared key set and get fresh ones
		// over their streams (after a third of their lifetime, or at once when the
		// signing key changed).
		Tokens:   r.keys,
		TokenTTL: tokenTTL,
		OnEvent:  w.onServerEvent,
		// Rotations of the server certificate move agents over by themselves, spread
		// over this window (the demo's forced reconnects preempt it in earlier phases).
		DrainWindow: w.drainWindow(),
		DrainGrace:  10 * time.Second,
		Logger:      w.log, // the replica names itself on every line (replica=replica-1)
		Registerer:  r.reg,
		// A new leaf whose issuer some agents do not trust yet waits for them.
		TrustGuard:         w.cfg.TrustGuards,
		TrustGuardInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return fmt.Errorf("demo: starting %s: %w", name, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	r.addr = ln.Addr().String()
	if err := w.serveStatus(ctx, r); err != nil {
		return err
	}
	unsub := r.srv.Certificate().Subscribe(func(_, next *hotcert.Material) {
		r.mu.Lock()
		lat := time.Since(r.swapAt)
		r.mu.Unlock()
		w.reloadLats.add(lat)
		w.c.reloads.Add(1)
		w.tl.Mark(MarkReload, fmt.Sprintf("%s serves serial %s", name, hotcert.FormatSerial(next.Leaf().SerialNumber)))
	})
	w.wg.Go(func() {
		defer unsub()
		if err := r.srv.Serve(ctx, ln); err != nil {
			w.log.Error("replica stopped", "replica", name, "error", err)
		}
	})
	w.replicas = append(w.replicas, r)
	return nil
}

func (w *world) startAgent(ctx context.Context, i int) error {
	r := w.replicas[i%len(w.replicas)]
	// Scale heartbeats and reconnect jitter with the fleet, as an operator would: a
	// thousand agents on two cores must not starve their own heartbeats (a stream that
	// hears nothing for three intervals is dropped) or reconnect as one herd.
	hb := max(2*time.Second, time.Duration(w.cfg.Agents)*10*time.Millisecond)
	if w.cfg.Short {
		hb = time.Second
	}
	jitter := max(300*time.Millisecond, time.Duration(w.cfg.Agents)*2*time.Millisecond)
	// The heartbeats are compressed so that tokens reach every agent within seconds;
	// the timeout need not be: replicas never die in the demo (a forced reconnect
	// closes the connections, which agents notice at once), so it only guards
	// against a dead peer, and a reconnect herd on a CPU-starved machine (every TLS
	// handshake under -race) can delay a replica's answers by seconds. An operator's
	// default (10s heartbeats, 30s timeout) has that margin too.
	timeout := max(10*time.Second, 3*hb)
	// The bootstrap token an operator would provision (a projected token file): issued
	// by one replica, verified by all of them. Once connected, the agent presents the
	// tokens the replicas hand it.
	boot, err := w.replicas[0].keys.Issue(agentID(i), tokenTTL)
	if err != nil {
		return fmt.Errorf("demo: bootstrap token of agent %d: %w", i, err)
	}
	a, err := agent.New(agent.Config{
		ID:                agentID(i),
		Token:             jwtkeys.StaticToken(boot),
		Server:            r.addr,
		ServerName:        "localhost",
		CAFile:            w.caPath(),
		Logger:            w.log, // the agent names itself on every line (agent=agent-0007)
		HeartbeatInterval: hb,
		HeartbeatTimeout:  timeout,
		ConnectTimeout:    10 * time.Second,
		MinBackoff:        100 * time.Millisecond,
		MaxBackoff:        time.Second,
		ReconnectJitter:   jitter,
		OnEvent:           w.onAgentEvent,
		// The CA of the leaf the agent's replica serves stays trusted until it serves
		// a leaf from a CA the bundle keeps.
		TrustGuard: w.cfg.TrustGuards,
	})
	if err != nil {
		return fmt.Errorf("demo: starting agent %d: %w", i, err)
	}
	w.agents = append(w.agents, a)
	unsub := a.CA().Subscribe(func(_, next *hotcert.Material) {
		w.c.bundleReloads.Add(1)
		w.tl.Mark(MarkBundleReload, fmt.Sprintf("%s trusts %s", a.ID(), w.trustName(next)))
	})
	w.wg.Go(func() { defer unsub(); _ = a.Run(ctx) })
	return nil
}

// nameCA gives ca the short name the timeline shows ("CA 2026").
func (w *world) nameCA(ca *hotcerttest.CA) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.caNames[hotcert.FingerprintOf(ca.Cert)] = strings.TrimPrefix(ca.Cert.Subject.CommonName, "hotcert demo ")
}

// nameCert gives a server certificate the name the timeline shows: its number in
// the story and its issuer ("cert 3 (CA 2026)").
func (w *world) nameCert(leaf *hotcerttest.Leaf) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fp := hotcert.FingerprintOf(leaf.Cert)
	if _, ok := w.certNames[fp]; !ok {
		issuer := w.caNames[hotcert.FingerprintOf(leaf.Issuer.Cert)]
		w.certNames[fp] = fmt.Sprintf("cert %d (%s)", len(w.certNames)+1, issuer)
		w.issuerNames[fp] = issuer
	}
}

// issuerName returns the timeline name of the CA that issued the server
// certificate fp.
func (w *world) issuerName(fp hotcert.Fingerprint) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.issuerNames[fp]; ok {
		return "issued by " + n
	}
	return "another issuer"
}

// certName returns the timeline name of a server certificate.
func (w *world) certName(fp hotcert.Fingerprint) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n, ok := w.certNames[fp]; ok {
		return n
	}
	return "another certificate"
}

// trustName returns the timeline name of the CA bundle m trusts ("CA 2025 + CA 2026").
func (w *world) trustName(m *hotcert.Material) string {
	if m == nil {
		return "nothing"
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for _, ca := range m.TrustCertificates() {
		n, ok := w.caNames[hotcert.FingerprintOf(ca)]
		if !ok {
			n = ca.Subject.CommonName
		}
		names = append(names, n)
	}
	return "trusts " + strings.Join(names, " + ")
}

// sample records the state of the fleet on the timeline.
func (w *world) sample() {
	s := Sample{Served: map[string]int{}, Trusted: map[string]int{}, Issuers: map[string]int{}, HandshakesOK: w.c.connects.Load(), HandshakesFailed: w.c.handshakeFails.Load()}
	for _, a := range w.agents {
		if fp, ok := a.ServerFingerprint(); ok {
			s.Served[w.certName(fp)]++
		} else {
			s.Disconnected++
		}
		s.Trusted[w.trustName(a.Trust().Current())]++
	}
	for _, r := range w.replicas {
		if m := r.srv.Serving().Current(); m.HasIdentity() {
			s.Issuers[w.issuerName(m.LeafFingerprint())]++
		}
	}
	w.tl.Sample(s)
}

// refusals returns how many reloads the replicas and agents refused so far.
func (w *world) refusals() uint64 {
	var n uint64
	for _, r := range w.replicas {
		n += r.srv.Certificate().Status().Failures
	}
	for _, a := range w.agents {
		n += a.CA().Status().Failures
	}
	return n
}

func agentID(i int) string { return fmt.Sprintf("agent-%04d", i) }

// connectsOf returns how many streams agent a registered, counted from its events:
// once it moved, the phase's counters include that connect (a.Stats() moves before
// the event is delivered).
func (w *world) connectsOf(a *agent.Agent) uint64 { return w.agentConnects[a.ID()].Load() }

// connectsSnapshot returns connectsOf of every agent.
func (w *world) connectsSnapshot() []uint64 {
	out := make([]uint64, len(w.agents))
	for i, a := range w.agents {
		out[i] = w.connectsOf(a)
	}
	return out
}

// movedOnto returns a counter of the agents that opened a new stream since before
// (a connectsSnapshot), on the server certificate fp.
func (w *world) movedOnto(fp hotcert.Fingerprint, before []uint64) func() int {
	return func() int {
		n := 0
		for i, a := range w.agents {
			if got, ok := a.ServerFingerprint(); ok && got == fp && w.connectsOf(a) > before[i] {
				n++
			}
		}
		return n
	}
}

func (w *world) onAgentEvent(ev agent.Event) {
	switch ev.Kind {
	case agent.EventConnected:
		w.gaps.connected(ev.AgentID, ev.Time)
		w.c.connects.Add(1)
		defer w.agentConnects[ev.AgentID].Add(1) // after the totals: see connectsOf
		w.mu.Lock()
		w.connectTimes = append(w.connectTimes, time.Now())
		w.mu.Unlock()
		if b := w.botched.Load(); b != nil && ev.Peer != nil && hotcert.FingerprintOf(ev.Peer) == *b {
			w.c.botchedFPsServed.Add(1)
		}
	case agent.EventConnectFailed:
		if ev.Reason == agentrpc.ReasonUnauthenticated {
			w.c.unauthenticated.Add(1)
			w.tl.Mark(MarkFailure, ev.AgentID+": token refused")
		}
	case agent.EventHandshakeFailed:
		switch ev.Reason {
		case agentrpc.ReasonUnreachable, agentrpc.ReasonTimeout:
			w.c.aborted.Add(1) // the demo dropped the connection mid-handshake
		default:
			w.c.handshakeFails.Add(1) // drawn as red bars on the timeline
		}
	case agent.EventStreamDropped:
		w.gaps.ended(ev.AgentID, ev.Time)
		if ev.Reason == agent.ReasonServerClosed {
			w.c.drained.Add(1) // a graceful drain: expected, not a drop
			return
		}
		w.c.drops.Add(1)
	}
}

func (w *world) onServerEvent(ev controlplane.Event) {
	if ev.Kind == controlplane.EventAuthRejected {
		w.c.tokensRefused.Add(1)
	}
}

// connected counts agents with an open stream.
func (w *world) connected() int {
	n := 0
	for _, a := range w.agents {
		if _, ok := a.ServerFingerprint(); ok {
			n++
		}
	}
	return n
}

// dropAll closes every agent connection on every replica, as a rollout of the
// control plane or a network blip would, forcing new handshakes.
func (w *world) dropAll() {
	w.tl.Mark(MarkForced, "forced reconnect: the demo drops every agent connection, as a control-plane restart would")
	// Said in demo.log too: the agents' "control plane stream dropped" warnings that
	// follow are this, not a failure.
	w.log.Warn("demo: forced reconnect: dropping every agent connection, as a control-plane restart would", "agents", len(w.agents))
	for _, r := range w.replicas {
		w.c.forcedDrops.Add(uint64(r.srv.DropConnections()))
	}
}

// waitFor polls cond until it holds or the phase timeout passes.
func (w *world) waitFor(ctx context.Context, cond func() bool) error {
	deadline := time.Now().Add(w.cfg.PhaseTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// rotate writes a key pair into every replica's volume (or only the given ones)
// and waits until each serves it.
func (w *world) write(r *replica, crt, key []byte) error {
	if _, err := r.volume.Write(map[string][]byte{"tls.crt": crt, "tls.key": key}); err != nil {
		return fmt.Errorf("demo: writing %s's certificate: %w", r.name, err)
	}
	return nil
}

// writeKeys writes the agent-token key volume: signing.key, and verify.pem with the
// public keys of verify (in one kubelet-style update).
func (w *world) writeKeys(signing *jwtKey, verify ...*jwtKey) error {
	var pub []byte
	for _, k := range verify {
		pub = append(pub, k.pub...)
	}
	if _, err := w.keyVolume.Write(map[string][]byte{jwtkeys.SigningKeyName: signing.priv, jwtkeys.VerificationKeysName: pub}); err != nil {
		return fmt.Errorf("demo: writing the agent-token keys: %w", err)
	}
	return nil
}

// holdingTokensOf counts agents whose newest token was signed by kid.
func (w *world) holdingTokensOf(kid string) int {
	n := 0
	for _, a := range w.agents {
		if a.Stats().TokenKeyID == kid {
			n++
		}
	}
	return n
}

func (w *world) writeBundle(cas ...*hotcerttest.CA) error {
	if _, err := w.caVolume.Write(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(cas...)}); err != nil {
		return fmt.Errorf("demo: writing the agents' CA bundle: %w", err)
	}
	return nil
}

func (w *world) close() {
	w.cancel()
	w.wg.Wait()
	for _, r := range w.replicas {
		r.srv.Close()
		r.keys.Close()
	}
	w.logFile.Close()
}

// hold lets the system run steadily for a moment.
func (w *world) hold(ctx context.Context) {
	d := 2 * time.Second
	if w.cfg.Short {
		d = 200 * time.Millisecond
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// drainWindow is the replicas' drain window: long enough to spread the fleet's
// reconnects, short enough for a demo.
func (w *world) drainWindow() time.Duration {
	if w.cfg.Short {
		return time.Second
	}
	return max(3*time.Second, time.Duration(w.cfg.Agents)*10*time.Millisecond)
}

// connectsSince returns the offsets of agent connects after t.
func (w *world) connectsSince(t time.Time) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for _, c := range w.connectTimes {
		if c.After(t) {
			out = append(out, c.Sub(t))
		}
	}
	return out
}
