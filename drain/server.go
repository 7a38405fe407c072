package drain

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// NewGRPCServer builds the grpc.Server for one connection. It must pass opts to
// grpc.NewServer (they carry the credentials and the drain interceptors), may add
// its own options, and registers its services on the result.
type NewGRPCServer func(opts ...grpc.ServerOption) *grpc.Server

// Server serves gRPC with one grpc.Server per connection, so that each connection can
// be drained on its own with a GOAWAY. Create it with [NewServer].
type Server struct {
	cfg       config
	newServer NewGRPCServer
	creds     credentials.TransportCredentials

	mu        sync.Mutex
	conns     map[*conn]*grpc.Server
	listeners map[net.Listener]struct{}
	timers    map[*time.Timer]struct{}
	stopped   bool
	unsubs    []func()
	wg        sync.WaitGroup // per-connection goroutines
	expiry    *expiry        // WithExpiryDrain; nil: off
}

// NewServer returns a Server whose connections are handshaken with creds (e.g.
// grpccreds.NewMTLSServer) and served by grpc.Servers from newServer.
func NewServer(creds credentials.TransportCredentials, newServer NewGRPCServer, opts ...Option) *Server {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	s := &Server{
		cfg: cfg, newServer: newServer, creds: creds,
		conns: map[*conn]*grpc.Server{}, listeners: map[net.Listener]struct{}{}, timers: map[*time.Timer]struct{}{},
	}
	p := &policy{cfg: &s.cfg, conns: s.targets, after: s.after,
		drain: func(t target, _ bool) bool { return s.drainConn(t.(*conn)) }, // a GOAWAY either way
		cut:   func(t target) bool { return t.(*conn).cut() }}
	s.unsubs = p.subscribe()
	s.expiry = newExpiry(&s.cfg, func(t target, _ string) bool { return s.drainConn(t.(*conn)) })
	return s
}

// targets returns the open connections, for the policy.
func (s *Server) targets() []target {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]target, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// after runs f after d, unless the Server stops first.
func (s *Server) after(d time.Duration, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		s.mu.Lock()
		delete(s.timers, t)
		s.mu.Unlock()
		f()
	})
	s.timers[t] = struct{}{}
}

// ErrServerStopped is returned by Serve after Stop or GracefulStop.
var ErrServerStopped = errors.New("drain: server stopped")

// Serve accepts connections on lis until it fails or the Server is stopped.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	s.listeners[lis] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, lis)
		s.mu.Unlock()
	}()

	var delay time.Duration
	for {
		raw, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return ErrServerStopped
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.serveConn(newConn(raw))
	}
}

func (s *Server) serveConn(c *conn) {
	srv := s.newServer(
		grpc.Creds(&trackingCreds{TransportCredentials: s.creds, s: s}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(withConn(ctx, c), req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &connStream{ServerStream: ss, ctx: withConn(ss.Context(), c)})
		}),
	)
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		c.Close()
		return
	}
	// No goroutine of its own per connection: Serve hands the connection to grpc
	// (whose transport goroutines serve it) and returns at once, and the clean-up
	// runs when the connection is closed (peer left, handshake failed, drained or
	// stopped), on a goroutine of its own since Close may be called from within
	// grpc's handling of the connection, which srv.Stop waits for. A goroutine
	// parked per connection for its whole life cost a stack per agent
	// (BenchmarkScaleAgents in the reference control plane). onClose is set under
	// s.mu before c is published in s.conns, so Stop's Close sees it.
	c.onClose = func() {
		s.expiry.forget(c)
		go func() {
			defer s.wg.Done()
			srv.Stop()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
	s.conns[c] = srv
	s.wg.Add(1)
	s.mu.Unlock()
	if err := srv.Serve(&oneConnListener{c: c}); err != nil && !errors.Is(err, net.ErrClosed) {
		c.Close() // grpc.Server refused the connection (it never took it)
	}
}

// Conns returns the number of open connections.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// drainConn sends c a GOAWAY (in-flight RPCs finish, Draining(ctx) fires for its
// RPCs) and closes it after the grace period at the latest.
func (s *Server) drainConn(c *conn) bool {
	s.mu.Lock()
	srv := s.conns[c]
	s.mu.Unlock()
	if srv == nil || !c.markDraining() {
		return false
	}
	s.wg.Go(func() {
		done := make(chan struct{})
		go func() { srv.GracefulStop(); close(done) }() // sends the GOAWAY at once
		// Tell long-lived handlers to finish only once the client has had time to
		// process the GOAWAY: a stream it re-opens then goes to a new connection, not
		// back onto this one.
		notify := time.NewTimer(DrainNotifyDelay)
		defer notify.Stop()
		grace := time.NewTimer(s.cfg.grace)
		defer grace.Stop()
		for {
			select {
			case <-notify.C:
				c.startDrain()
				continue
			case <-done:
			case <-grace.C:
				srv.Stop()
				<-done
			}
			return
		}
	})
	return true
}

// DrainNotifyDelay is how long after a connection's GOAWAY [Draining] fires.
const DrainNotifyDelay = 200 * time.Millisecond

// GracefulStop stops accepting, drains every connection (bounded by the grace
// period) and waits for them.
func (s *Server) GracefulStop() { s.stop(true) }

// Stop closes every listener and connection at once.
func (s *Server) Stop() { s.stop(false) }

func (s *Server) stop(graceful bool) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.stopped = true
	for l := range s.listeners {
		l.Close()
	}
	for t := range s.timers {
		t.Stop()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	unsubs := s.unsubs
	s.mu.Unlock()
	for _, u := range unsubs {
		u()
	}
	s.expiry.close()
	for _, c := range conns {
		if graceful {
			s.drainConn(c)
		} else {
			c.Close()
		}
	}
	s.wg.Wait()
}
