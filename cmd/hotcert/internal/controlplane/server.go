// Package controlplane is hotcert's reference control plane: a gRPC
// server where agents hold long-lived bidirectional streams (register, heartbeat,
// receive work), whose certificate is re-read from its source and served on the next
// handshake after it changes. A certificate that does not load keeps the last good
// one serving, is logged once ("TLS certificate reload failed", listener=agent_grpc,
// the source) and counted once; a missing or invalid certificate at startup is an
// error from New.
//
// With Config.Tokens the server authenticates agents with bearer JWTs signed by a
// jwtkeys.KeySet: a stream without a valid token issued to the agent id it registers
// with fails with codes.Unauthenticated, and connected agents receive fresh tokens,
// signed by the current key, over their stream, so a signing-key rotation reaches
// every agent before the old key is removed.
//
// Several Servers can live in one process (a demo with many replicas): each has its
// own reloaders, logger and Prometheus registerer.
package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/tlsconfig"
)

// Server is a control plane replica. Create it with New, run it with Serve.
type Server struct {
	cfg      Config
	log      *slog.Logger
	cert     *hotcert.Reloader
	clientCA *hotcert.Reloader    // nil without mTLS
	deny     *revocation.Reloader // nil without Config.DenyList
	peers    peerTracker          // verified peer chains of open connections
	guard    *trustGuard          // nil without Config.TrustGuard
	serving  drain.Provider       // what handshakes serve: the guard, or the reloader
	gs       grpcServer
	conns    connTracker

	startOnce sync.Once
	closeOnce sync.Once
	stopping  chan struct{} // closed when the server shuts down: every stream ends
	reloaders sync.WaitGroup
	reloadCtx context.Context
	cancel    context.CancelFunc

	mu       sync.Mutex
	sessions map[*session]struct{}
	gone     map[string]departure // by agent id: agents whose stream closed (departed.go)
	failures map[string]uint64    // handshake failures by reason
	refused  map[string]uint64    // refused tokens by reason

	opened, closed, handshakes, handshakeFails, heartbeats, workSent, workSeq atomic.Uint64
	authFails, tokensIssued                                                   atomic.Uint64
}

// New loads the certificate (and client CA bundle) and builds the gRPC server, in
// named steps: register the metrics, load the server certificate, put the trust
// guard in front of it, load the client CA bundle, then build the gRPC server that
// serves agents. A missing or invalid certificate is an error. Call Serve to accept
// agents.
func New(cfg Config) (*Server, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger.With("replica", cfg.Replica), // every line names the replica once, its reloaders' and drains' too
		stopping: make(chan struct{}),
		sessions: make(map[*session]struct{}),
		gone:     make(map[string]departure),
		failures: make(map[string]uint64),
		refused:  make(map[string]uint64),
	}
	s.reloadCtx, s.cancel = context.WithCancel(context.Background())
	observer, err := s.registerMetrics()
	if err != nil {
		return nil, err
	}
	if err := s.loadCertificate(observer); err != nil {
		return nil, err
	}
	if err := s.guardServing(); err != nil {
		return nil, err
	}
	creds, err := s.transportCredentials(observer)
	if err != nil {
		return nil, err
	}
	if s.gs, err = s.buildGRPC(creds); err != nil {
		return nil, err
	}
	return s, nil
}

// registerMetrics registers the hotcert_tls_* recorder and the server's collectors
// with Config.Registerer, and returns the recorder the reloaders report to (nil
// without a registerer).
func (s *Server) registerMetrics() (hotcert.Observer, error) {
	reg := s.cfg.Registerer
	if reg == nil {
		return nil, nil
	}
	rec, err := metrics.New(reg, s.cfg.MetricsOptions...)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	if err := reg.Register(&collector{s: s}); err != nil {
		return nil, fmt.Errorf("controlplane: register metrics: %w", err)
	}
	if err := reg.Register(fleetCollector{s: s}); err != nil {
		return nil, fmt.Errorf("controlplane: register fleet metrics: %w", err)
	}
	return rec, nil
}

// reloaderOptions are the options of the reloader of component: its name, the log
// attribute that carries it, the logger, the observer (if any), extra, then
// Config.ReloaderOptions.
func (s *Server) reloaderOptions(observer hotcert.Observer, component string, extra ...hotcert.Option) []hotcert.Option {
	opts := []hotcert.Option{hotcert.WithComponent(component), hotcert.WithComponentLabel(s.cfg.ComponentKey), hotcert.WithLogger(s.log)}
	if observer != nil {
		opts = append(opts, hotcert.WithObserver(observer))
	}
	return append(append(opts, extra...), s.cfg.ReloaderOptions...)
}

// loadCertificate loads the server certificate, which handshakes serve unless a
// trust guard stands in front of it.
func (s *Server) loadCertificate(observer hotcert.Observer) error {
	var err error
	s.cert, err = hotcert.New(s.reloadCtx, s.cfg.TLS, s.reloaderOptions(observer, s.cfg.Component)...)
	if err != nil {
		return fmt.Errorf("controlplane: server certificate: %w", err)
	}
	s.serving = s.cert
	return nil
}

// guardServing, with Config.TrustGuard, puts the trust guard between the
// certificate and the handshakes (and registers its metrics).
func (s *Server) guardServing() error {
	if !s.cfg.TrustGuard {
		return nil
	}
	s.guard = newTrustGuard(s, s.cert, s.cfg.TrustGuardMargin, s.cfg.TrustGuardRemember, s.cfg.Clock)
	s.serving = s.guard
	if s.cfg.Registerer != nil {
		if err := s.cfg.Registerer.Register(guardCollector{g: s.guard}); err != nil {
			return fmt.Errorf("controlplane: register trust guard metrics: %w", err)
		}
	}
	return nil
}

// transportCredentials serves what the handshakes serve; with Config.ClientCA it
// loads the client CA bundle and requires client certificates that chain to it.
func (s *Server) transportCredentials(observer hotcert.Observer) (credentials.TransportCredentials, error) {
	if s.cfg.ClientCA == nil {
		return grpccreds.NewServer(s.serving), nil
	}
	var err error
	s.clientCA, err = hotcert.New(s.reloadCtx, s.cfg.ClientCA, s.reloaderOptions(observer, s.cfg.Component+"_client_ca",
		hotcert.WithLogMessages("client CA bundle loaded", "client CA bundle reloaded", "client CA bundle reload failed"),
		hotcert.WithValidation(hotcert.WithRequireTrust()))...)
	if err != nil {
		return nil, fmt.Errorf("controlplane: client CA bundle: %w", err)
	}
	if err := s.loadDenyList(); err != nil {
		return nil, err
	}
	opts := []tlsconfig.Option{tlsconfig.WithTrust(s.clientCA)}
	if s.deny != nil {
		opts = append(opts, tlsconfig.WithDenyList(s.deny))
	}
	return grpccreds.NewMTLSServer(s.serving, opts...), nil
}

// buildGRPC builds the server that serves agents over creds (counting
// handshakes): a grpc.Server, or with Config.DrainWindow, Config.CutUntrusted or
// Config.DrainBeforeExpiry a
// drain.Server that serves each connection with a grpc.Server of its own.
func (s *Server) buildGRPC(creds credentials.TransportCredentials) (grpcServer, error) {
	opts := s.serverOptions()
	creds = &countingCreds{TransportCredentials: creds, s: s}
	newGRPC := func(extra ...grpc.ServerOption) *grpc.Server {
		gs := grpc.NewServer(append(extra, opts...)...)
		gs.RegisterService(agentrpc.ServiceDesc(s.handle), nil)
		return gs
	}
	if s.cfg.DrainWindow > 0 || s.cfg.CutUntrusted || s.deny != nil || s.cfg.DrainBeforeExpiry > 0 {
		dopts, err := s.drainOptions()
		if err != nil {
			return nil, err
		}
		return drain.NewServer(creds, newGRPC, dopts...), nil
	}
	return newGRPC(grpc.Creds(creds)), nil
}

// serverOptions are the options of every grpc.Server that serves agents: timeouts,
// buffers, keepalive, and with Config.Tokens the interceptors that verify tokens.
func (s *Server) serverOptions() []grpc.ServerOption {
	cfg := &s.cfg
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(cfg.HandshakeTimeout),
		// Messages are tiny: small transport buffers keep thousands of agent
		// connections cheap (the default is 32 KiB each way per connection).
		grpc.ReadBufferSize(4 << 10), grpc.WriteBufferSize(4 << 10),
		// Agents heartbeat on their streams; tolerate their keepalive pings too.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if cfg.Tokens != nil {
		// Interceptors are server options: both the plain server and every per-connection
		// server of a drain.Server verify tokens.
		hook := jwtgrpc.WithRejectionHook(s.tokenRejected)
		opts = append(opts,
			grpc.ChainStreamInterceptor(jwtgrpc.StreamServerInterceptor(cfg.Tokens, hook)),
			grpc.ChainUnaryInterceptor(jwtgrpc.UnaryServerInterceptor(cfg.Tokens, hook)))
	}
	if cfg.MaxConnectionAge > 0 {
		kp := keepalive.ServerParameters{MaxConnectionAge: cfg.MaxConnectionAge}
		if cfg.MaxConnectionAgeGrace > 0 {
			kp.MaxConnectionAgeGrace = cfg.MaxConnectionAgeGrace
		}
		opts = append(opts, grpc.KeepaliveParams(kp))
	}
	return opts
}

// drainOptions are the drain.Server's options: the identity drain with
// Config.DrainWindow, the trust cut with Config.CutUntrusted, the expiry drain with
// Config.DrainBeforeExpiry, and its metrics.
func (s *Server) drainOptions() ([]drain.Option, error) {
	cfg := &s.cfg
	dopts := []drain.Option{drain.WithLogger(s.log), drain.WithComponent(cfg.Component), drain.WithComponentLabel(cfg.ComponentKey), drain.WithGrace(cfg.DrainGrace)}
	if cfg.DrainWindow > 0 {
		dopts = append(dopts, drain.WithIdentityDrain(s.serving, cfg.DrainWindow))
	}
	if cfg.CutUntrusted {
		dopts = append(dopts, drain.WithTrustCut(s.clientCA))
	}
	if s.deny != nil {
		dopts = append(dopts, drain.WithRevocationCut(s.deny))
	}
	if cfg.DrainBeforeExpiry > 0 {
		dopts = append(dopts, drain.WithExpiryDrain(s.serving, cfg.DrainBeforeExpiry, cfg.DrainWindow), drain.WithClock(cfg.ExpiryClock))
	}
	if cfg.Registerer != nil {
		dm, err := metrics.NewDrain(cfg.Registerer, cfg.MetricsOptions...)
		if err != nil {
			return nil, fmt.Errorf("controlplane: %w", err)
		}
		dopts = append(dopts, drain.WithObserver(dm))
	}
	return dopts, nil
}

// grpcServer is a grpc.Server, or a drain.Server that serves each connection with a
// grpc.Server of its own so it can be drained alone.
type grpcServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// Serve accepts agents on ln until ctx is done, then ends every stream, stops
// gracefully (at most ShutdownGrace) and closes the server. The certificate is
// followed from the first Serve until Close. Serve may be called once per listener;
// it returns nil on a normal stop.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.startOnce.Do(s.startReloaders)
	errc := make(chan error, 1)
	go func() { errc <- s.gs.Serve(s.conns.wrap(ln)) }()
	select {
	case <-ctx.Done():
		s.Close()
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, drain.ErrServerStopped) {
			return nil
		}
		return fmt.Errorf("controlplane: serve: %w", err)
	}
}

func (s *Server) startReloaders() {
	for _, r := range []*hotcert.Reloader{s.cert, s.clientCA} {
		if r != nil {
			s.reloaders.Go(func() { _ = r.Start(s.reloadCtx) })
		}
	}
	if s.guard != nil {
		s.reloaders.Go(func() { s.guard.run(s.reloadCtx, s.cfg.TrustGuardInterval) })
	}
	if s.deny != nil {
		s.reloaders.Go(func() { _ = s.deny.Start(s.reloadCtx) })
	}
}

// Close ends every agent stream, stops the gRPC server (gracefully for at most
// ShutdownGrace) and stops following the certificate. It is safe to call more than
// once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.stopping)
		done := make(chan struct{})
		go func() { s.gs.GracefulStop(); close(done) }()
		t := time.NewTimer(s.cfg.ShutdownGrace)
		select {
		case <-done:
		case <-t.C:
			s.gs.Stop()
			<-done
		}
		t.Stop()
		s.cancel()
		for _, r := range []*hotcert.Reloader{s.cert, s.clientCA} {
			if r != nil {
				r.Close()
			}
		}
		if s.deny != nil {
			s.deny.Close()
		}
		s.reloaders.Wait()
	})
	return nil
}

// DropConnections closes every agent connection at once, as a replica restart or a
// network blip does, and returns how many there were. Agents reconnect with a new
// TLS handshake (tests and demos use it to force reconnects).
func (s *Server) DropConnections() int { return s.conns.closeAll() }

// Certificate returns the reloader of the server certificate: its Current material
// is what the next handshake serves, its Status the last reload error.
func (s *Server) Certificate() *hotcert.Reloader { return s.cert }

// Serving returns what the next handshake serves: the certificate reloader's
// material, or with Config.TrustGuard the leaf the guard lets through.
func (s *Server) Serving() hotcert.Provider { return s.serving }

// Tokens returns the key set agents' tokens are verified and issued with, or nil.
func (s *Server) Tokens() *jwtkeys.KeySet { return s.cfg.Tokens }

// ClientCA returns the reloader of the client CA bundle, or nil without mTLS.
func (s *Server) ClientCA() *hotcert.Reloader { return s.clientCA }

// Replica returns the replica name.
func (s *Server) Replica() string { return s.cfg.Replica }

func (s *Server) handshakeFailed(remote net.Addr, reason string, err error) {
	s.handshakeFails.Add(1)
	s.mu.Lock()
	s.failures[reason]++
	s.mu.Unlock()
	s.log.Debug("agent TLS handshake failed", s.cfg.ComponentKey, s.cfg.Component, "remote", addrString(remote), "reason", reason, "error", err.Error())
	s.emit(Event{Kind: EventHandshakeFailed, Remote: addrString(remote), Reason: reason, Err: err})
}

// Reasons a token was refused, besides the jwtkeys.RejectReason values (expired,
// unknown_key, signature, ...).
const (
	// AuthReasonMissing: the stream carried no bearer token.
	AuthReasonMissing = "missing"
	// AuthReasonSubject: the token verified but was issued to another agent id.
	AuthReasonSubject = "subject"
)

// tokenRejected counts and reports a stream or RPC whose token the interceptor
// refused.
func (s *Server) tokenRejected(ctx context.Context, _ string, err error) {
	reason := string(jwtkeys.RejectReasonOf(err))
	if reason == "" {
		reason = AuthReasonMissing
	}
	remote := ""
	if p, ok := peer.FromContext(ctx); ok {
		remote = addrString(p.Addr)
	}
	s.authRejected(remote, "", reason, err)
}

func (s *Server) authRejected(remote, agentID, reason string, err error) {
	s.authFails.Add(1)
	s.mu.Lock()
	s.refused[reason]++
	s.mu.Unlock()
	attrs := []any{s.cfg.ComponentKey, s.cfg.Component, "remote", remote, "reason", reason, "error", err.Error()}
	if agentID != "" {
		attrs = append(attrs, "agent", agentID)
	}
	s.log.Warn("agent token rejected", attrs...)
	s.emit(Event{Kind: EventAuthRejected, AgentID: agentID, Remote: remote, Reason: reason, Err: err})
}

func (s *Server) emit(e Event) {
	if s.cfg.OnEvent != nil {
		e.Replica = s.cfg.Replica
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		s.cfg.OnEvent(e)
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
