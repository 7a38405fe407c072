// Package agent is hotcert's reference agent: it holds one long-lived
// bidirectional gRPC stream to the control plane (register, heartbeat, receive
// work) and reconnects with jittered backoff when it drops.
//
// The CA bundle the server certificate is verified against is re-read on every
// connection, the first and every reconnect, and may hold several CAs, so a three
// step CA rotation with a union bundle never fails a handshake. A bundle that does
// not load keeps the last good one and is logged once ("agent TLS CA bundle reload
// failed", file=<path>) and counted once; a missing or invalid bundle at startup is
// an error from New. A handshake that fails verification fails the connection
// attempt at once, with the x509 reason, instead of waiting for a deadline.
//
// With Config.Token the agent presents a bearer token when it opens its stream: the
// newest one the control plane handed it (in its registered reply and heartbeat
// acknowledgements), else the bootstrap token. A refused token fails the attempt
// with reason "unauthenticated" and backs off like any failed attempt; the next one
// presents the bootstrap token.
//
// Agents are cheap (one gRPC ClientConn and two goroutines while connected), so a
// demo can run a thousand in one process.
package agent

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

const bufferSize = 4 << 10

// Agent is one reference agent. Create it with New, run it with Run.
type Agent struct {
	cfg         Config
	log         *slog.Logger
	ca          *hotcert.Reloader
	trust       hotcert.Provider  // what connections verify the control plane with: ca, or guard
	guard       *trustGuard       // nil without Config.TrustGuard
	identity    *hotcert.Reloader // client certificate, or nil
	target      string
	dialOpts    []grpc.DialOption
	ccMu        sync.Mutex
	cc          *grpc.ClientConn                    // replaced after a failed attempt (see redial); nil once closed
	conn        atomic.Pointer[net.Conn]            // the last handshaken connection
	deny        *revocation.Reloader                // nil without Config.DenyList
	serverChain atomic.Pointer[[]*x509.Certificate] // the verified chain of the last handshake
	rotated     atomic.Bool                         // the current session ends for a client-certificate rotation
	expiring    atomic.Bool                         // the current session ends before a certificate expires (expiry.go)
	token       *jwtkeys.HeldTokenSource            // nil without Config.Token
	running     atomic.Bool
	closeOnce   sync.Once

	c counters
}

// New loads the CA bundle (and client certificate) and prepares the connection.
// A missing or invalid file is an error. Call Run to connect.
func New(cfg Config) (*Agent, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Logger.With("agent", cfg.ID)}
	a.c.init()

	var observer hotcert.Observer
	if cfg.Registerer != nil {
		rec, err := metrics.New(cfg.Registerer, cfg.MetricsOptions...)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		observer = rec
		if err := cfg.Registerer.Register(&collector{a: a}); err != nil {
			return nil, fmt.Errorf("agent: register metrics: %w", err)
		}
	}
	load := func(src hotcert.Source, component string, extra ...hotcert.Option) (*hotcert.Reloader, error) {
		opts := []hotcert.Option{hotcert.WithComponent(component), hotcert.WithLogger(a.log)}
		if observer != nil {
			opts = append(opts, hotcert.WithObserver(observer))
		}
		if !cfg.Watch {
			// Read only when dialing: a dial cannot wait out a settle window, and no
			// later read would report the failure, so report it at once.
			opts = append(opts, hotcert.WithSettle(0))
		}
		return hotcert.New(context.Background(), src, append(append(opts, extra...), cfg.ReloaderOptions...)...)
	}

	caSrc, err := file.New(file.WithCA(cfg.CAFile), file.WithLogger(a.log))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.ca, err = load(caSrc, ComponentCA,
		hotcert.WithLogMessages("agent TLS CA bundle loaded", "agent TLS CA bundle reloaded", "agent TLS CA bundle reload failed"),
		hotcert.WithLogAttrs("file", cfg.CAFile),
		hotcert.WithValidation(hotcert.WithRequireTrust()))
	if err != nil {
		return nil, fmt.Errorf("agent: CA bundle: %w", err)
	}
	a.trust = a.ca
	if cfg.TrustGuard {
		a.guard = &trustGuard{log: a.log, src: a.ca, max: cfg.TrustGuardMax, now: cfg.Clock, revoked: cfg.RevokedCAs}
		a.trust = a.guard
	}
	provider := a.trust
	opts := []tlsconfig.Option{tlsconfig.WithReloadOnDial(a.ca)}
	if err := a.loadDenyList(); err != nil {
		return nil, err
	}
	if a.deny != nil {
		opts = append(opts, tlsconfig.WithDenyList(a.deny))
		if !cfg.Watch {
			opts = append(opts, tlsconfig.WithReloadOnDial(a.deny))
		}
	}
	if cfg.CertFile != "" {
		idSrc, err := file.New(file.WithKeyPair(cfg.CertFile, cfg.KeyFile), file.WithLogger(a.log))
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.identity, err = load(idSrc, ComponentClientCert,
			hotcert.WithLogAttrs("cert_file", cfg.CertFile, "key_file", cfg.KeyFile),
			hotcert.WithValidation(hotcert.WithRequireIdentity()))
		if err != nil {
			return nil, fmt.Errorf("agent: client certificate: %w", err)
		}
		provider = a.identity
		opts = append(opts, tlsconfig.WithTrust(a.trust), tlsconfig.WithReloadOnDial(a.identity))
	}
	if cfg.ServerName != "" {
		opts = append(opts, tlsconfig.WithServerName(cfg.ServerName))
	}
	creds := &observedCreds{TransportCredentials: grpccreds.NewClient(provider, opts...), a: a}

	target := cfg.Server
	if !strings.Contains(target, "://") {
		target = "passthrough:///" + target // no resolver goroutine per agent
	}
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if cfg.Token != nil {
		// The newest token the control plane pushed, else the bootstrap token.
		a.token = jwtkeys.NewHeldTokenSource(cfg.Token)
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(a.token)))
	}
	a.target = target
	a.dialOpts = append(dialOpts,
		// Messages are tiny: small transport buffers keep a thousand agents in one
		// process cheap (the default is 32 KiB each way per connection).
		grpc.WithReadBufferSize(bufferSize), grpc.WithWriteBufferSize(bufferSize),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: cfg.MinBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.MaxBackoff},
			MinConnectTimeout: cfg.ConnectTimeout,
		}))
	a.cc, err = grpc.NewClient(a.target, a.dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return a, nil
}

// clientConn returns the connection the next attempt opens its stream on, or nil
// once the agent is closed.
func (a *Agent) clientConn() *grpc.ClientConn {
	a.ccMu.Lock()
	defer a.ccMu.Unlock()
	return a.cc
}

// redial replaces the ClientConn after a failed attempt. A failed ClientConn is
// in TRANSIENT_FAILURE, and gRPC's pick-first policy stays there ("sticky") until
// a connection succeeds: a fail-fast stream opened on it is refused at once with
// the previous attempt's error, without dialing, even after ResetConnectBackoff.
// The agent's own backoff is the only one, so the attempt after it must be a real
// dial (one that re-reads the bundle); a new ClientConn starts IDLE and dials on
// the first stream.
func (a *Agent) redial() error {
	cc, err := grpc.NewClient(a.target, a.dialOpts...)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.ccMu.Lock()
	old := a.cc
	if old != nil {
		a.cc = cc
	}
	a.ccMu.Unlock()
	if old == nil { // closed meanwhile
		cc.Close()
		return nil
	}
	old.Close()
	return nil
}

// ID returns the agent's id.
func (a *Agent) ID() string { return a.cfg.ID }

// CA returns the reloader of the CA bundle: Current is the bundle read last (what
// the next connection trusts, unless the trust guard keeps a removed CA), Status the
// last reload error.
func (a *Agent) CA() *hotcert.Reloader { return a.ca }

// Trust returns what the next connection verifies the control plane with: the
// bundle, plus the CA the trust guard keeps (Config.TrustGuard).
func (a *Agent) Trust() hotcert.Provider { return a.trust }

// KeptCA returns the CA the trust guard keeps beyond the bundle, if any.
func (a *Agent) KeptCA() (hotcert.Fingerprint, bool) {
	if a.guard == nil {
		return hotcert.Fingerprint{}, false
	}
	return a.guard.Kept()
}

// ClientCertificate returns the reloader of the client certificate, or nil.
func (a *Agent) ClientCertificate() *hotcert.Reloader { return a.identity }

// Run connects to the control plane and keeps a stream open until ctx is done,
// reconnecting after drops (with a random delay up to ReconnectJitter) and after
// failed attempts (with jittered exponential backoff). It returns nil when ctx is
// done, and closes the agent: Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	var wg sync.WaitGroup
	defer func() {
		a.Close()
		wg.Wait()
	}()
	if a.cfg.Watch {
		for _, r := range a.reloaders() {
			wg.Go(func() { _ = r.Start(ctx) })
		}
	}
	if a.deny != nil {
		wg.Go(func() { a.followDenyList(ctx) })
	}
	if a.identity != nil && a.cfg.ReconnectOnCertChange > 0 {
		if !a.cfg.Watch {
			wg.Go(func() { _ = a.identity.Start(ctx) }) // notice the rotation between dials
		}
		wg.Go(func() { drain.ReconnectOnChange(ctx, a.identity, a.cfg.ReconnectOnCertChange, a.rehandshake) })
	}
	bo := newBackoff(a.cfg.MinBackoff, a.cfg.MaxBackoff)
	for {
		established, err := a.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var wait time.Duration
		switch {
		case established && a.expiring.Swap(false):
			bo.reset()
			a.log.Info("reconnecting onto certificates that do not expire yet", "server", a.cfg.Server)
		case established && a.rotated.Swap(false):
			bo.reset()
			a.log.Info("reconnecting to present the rotated client certificate", "server", a.cfg.Server)
		case established && serverClosed(err):
			// The server ended the stream cleanly: it is draining this connection
			// (a rotation, spread over its window already). Re-open at once.
			bo.reset()
			a.log.Info("control plane asked to reconnect", "server", a.cfg.Server)
		case established:
			bo.reset()
			wait = rand.N(a.cfg.ReconnectJitter + 1)
			a.log.Warn("control plane stream dropped", "server", a.cfg.Server, "error", errText(err), "reconnect_in", wait.String())
		default:
			wait = bo.next()
			a.log.Warn("control plane connection failed", "server", a.cfg.Server, "reason", agentReason(err), "error", errText(err), "retry_in", wait.String())
			if err := a.redial(); err != nil {
				return err
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Close releases the connection and stops following the files. Run calls it when
// it returns; call it yourself only for an Agent that is never run. It is safe to
// call more than once.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		a.ccMu.Lock()
		cc := a.cc
		a.cc = nil
		a.ccMu.Unlock()
		cc.Close()
		for _, r := range a.reloaders() {
			r.Close()
		}
	})
	return nil
}

func (a *Agent) reloaders() []*hotcert.Reloader {
	if a.identity != nil {
		return []*hotcert.Reloader{a.ca, a.identity}
	}
	return []*hotcert.Reloader{a.ca}
}

// connectError carries the reason of a failed connection attempt.
type connectError struct {
	reason string
	err    error
}

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

func agentReason(err error) string {
	var ce *connectError
	if errors.As(err, &ce) {
		return ce.reason
	}
	return agentrpc.HandshakeReason(err)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// session opens a stream, registers and runs it until it ends. established says
// whether registration succeeded (the end is then a drop, not a failed attempt).
func (a *Agent) session(ctx context.Context) (established bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failsBefore := a.c.handshakeFails.Load()

	// Bound the whole opening (dial, handshake, register) without putting a
	// deadline on the stream itself, which lives as long as the connection.
	timer := time.AfterFunc(a.cfg.ConnectTimeout, cancel)
	stream, reg, err := a.open(sctx)
	timedOut := !timer.Stop()
	if timedOut && err == nil {
		err = context.Canceled // the stream was opened, but cancelled by the timer
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		reason := agentrpc.HandshakeReason(err)
		switch {
		case a.c.handshakeFails.Load() != failsBefore:
			reason = a.c.lastHandshakeReason() // the typed TLS error, not its gRPC wrapping
		case timedOut:
			reason, err = agentrpc.ReasonTimeout, fmt.Errorf("no stream within %s: %w", a.cfg.ConnectTimeout, err)
		}
		if reason == agentrpc.ReasonUnauthenticated && a.token != nil {
			// The control plane refused the token (or there was none to present): drop
			// the held one, so the next attempt presents the bootstrap token.
			a.token.Invalidate()
		}
		a.c.connectFailed(reason)
		a.emit(Event{Kind: EventConnectFailed, Reason: reason, Err: err})
		return false, &connectError{reason: reason, err: err}
	}

	info := streamInfo{replica: reg.Replica, since: time.Now()}
	var serverChain []*x509.Certificate
	if p, ok := peer.FromContext(stream.Context()); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			info.peer = ti.State.PeerCertificates[0]
			serverChain = hotcert.PeerChain(ti.State)
		}
	}
	info.chain = serverChain
	defer a.planExpiryReconnect(serverChain)()
	a.holdToken(reg.Token) // before connected: whoever sees the stream sees its token
	a.c.connected(info)
	attrs := []any{"server", a.cfg.Server, "replica", info.replica}
	if info.peer != nil {
		attrs = append(attrs, "server_serial", hotcert.FormatSerial(info.peer.SerialNumber), "server_sha256", hotcert.FingerprintOf(info.peer).String(),
			"server_issuer", info.peer.Issuer.String())
	}
	a.log.Info("connected to control plane", attrs...)
	a.emit(Event{Kind: EventConnected, Replica: info.replica, Peer: info.peer})

	err = a.run(sctx, cancel, stream)
	uptime := a.c.disconnected(ctx.Err() == nil)
	if ctx.Err() == nil {
		ev := Event{Kind: EventStreamDropped, Replica: info.replica, Uptime: uptime, Err: err}
		switch {
		case a.expiring.Load():
			ev.Reason = ReasonCertExpiring
		case a.rotated.Load():
			ev.Reason = ReasonClientRotated
		case serverClosed(err):
			ev.Reason = ReasonServerClosed
		}
		a.emit(ev)
	}
	return true, err
}

// open opens the stream and registers. It fails fast: no WaitForReady, so a
// handshake that fails verification fails the call with the TLS error.
func (a *Agent) open(ctx context.Context) (grpc.ClientStream, agentrpc.Message, error) {
	cc := a.clientConn()
	if cc == nil {
		return nil, agentrpc.Message{}, errors.New("agent: closed")
	}
	stream, err := cc.NewStream(ctx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
	if err != nil {
		return nil, agentrpc.Message{}, err
	}
	if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: a.cfg.ID, Trust: a.trustReport(ctx, false)}); err != nil {
		return nil, agentrpc.Message{}, recvErr(stream, err)
	}
	reg, err := agentrpc.Recv(stream)
	if err != nil {
		return nil, agentrpc.Message{}, err
	}
	if reg.Type != agentrpc.TypeRegistered {
		return nil, agentrpc.Message{}, fmt.Errorf("agent: expected %q from the control plane, got %q", agentrpc.TypeRegistered, reg.Type)
	}
	return stream, reg, nil
}

// recvErr returns the stream's status after a failed send (SendMsg returns io.EOF
// and leaves the real error to RecvMsg).
func recvErr(stream grpc.ClientStream, sendErr error) error {
	if _, err := agentrpc.Recv(stream); err != nil {
		return err
	}
	return sendErr
}

// run heartbeats and receives until the stream ends. cancel ends the stream.
func (a *Agent) run(ctx context.Context, cancel context.CancelFunc, stream grpc.ClientStream) error {
	live := newLiveness(a.cfg.HeartbeatInterval, a.cfg.HeartbeatTimeout, time.Now())
	var recvErr error
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			m, err := agentrpc.Recv(stream)
			if err != nil {
				recvErr = err
				return
			}
			live.received(time.Now())
			switch m.Type {
			case agentrpc.TypeHeartbeatAck:
				a.c.acks.Add(1)
				a.holdToken(m.Token)
			case agentrpc.TypeWork:
				a.c.work.Add(1)
				a.emit(Event{Kind: EventWork, Seq: m.Seq, Payload: m.Payload})
			}
		}
	}()
	defer func() { cancel(); <-recvDone }()

	hb := time.NewTicker(a.cfg.HeartbeatInterval)
	defer hb.Stop()
	var seq uint64
	for {
		select {
		case <-recvDone:
			return recvErr
		case <-ctx.Done():
			return ctx.Err()
		case <-hb.C:
			if dead, silent := live.silent(time.Now()); dead {
				return fmt.Errorf("agent: nothing received from the control plane for %s (%d heartbeats unanswered)", silent.Round(time.Millisecond), live.unanswered.Load())
			}
			seq++
			if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeHeartbeat, Seq: seq, Trust: a.trustReport(ctx, true)}); err != nil {
				cancel()
				<-recvDone
				return recvErr
			}
			live.sent()
		}
	}
}

// holdToken keeps a token the control plane handed over for the next connection.
func (a *Agent) holdToken(tok string) {
	if tok == "" || a.token == nil {
		return
	}
	a.token.Set(tok)
	a.c.tokenReceived(tok)
}

func (a *Agent) emit(e Event) {
	if a.cfg.OnEvent != nil {
		e.AgentID, e.Time = a.cfg.ID, time.Now()
		a.cfg.OnEvent(e)
	}
}

// Reasons of stream_dropped events that are part of a rotation, not failures.
const (
	// ReasonServerClosed: the server ended the stream cleanly, as a draining server
	// does to move agents onto new material.
	ReasonServerClosed = "server_closed"
	// ReasonClientRotated: the agent closed its connection to present its rotated
	// client certificate (Config.ReconnectOnCertChange).
	ReasonClientRotated = "client_rotated"
)

// serverClosed reports whether a stream ended because the server closed it with an
// OK status (RecvMsg returns io.EOF).
func serverClosed(err error) bool { return errors.Is(err, io.EOF) }

// rehandshake closes the current connection so that the next one presents the
// rotated client certificate (an established TLS connection keeps the certificate it
// was opened with). The session ends and is re-opened at once.
func (a *Agent) rehandshake() {
	if c := a.conn.Load(); c != nil {
		a.rotated.Store(true)
		(*c).Close()
	}
}
