package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
)

// handshakeTimeout bounds a client's TLS handshake in ModeTCP.
const handshakeTimeout = 10 * time.Second

// tcpServer forwards bytes: a Server's ModeTCP half (TLS in front, plaintext to
// the backend) and a Client's (plaintext in front, TLS to the remote).
type tcpServer struct {
	cfg      *config
	target   string
	trackers []*drain.Tracker
	// front wraps an accepted connection (in a *tls.Conn for a Server).
	front func(raw net.Conn) net.Conn
	// dial opens the other side for the established front connection.
	dial  func(ctx context.Context, front net.Conn) (net.Conn, error)
	stop  chan struct{} // closed by shutdown
	peers peerSet       // the verified peers of the open connections

	mu      sync.Mutex
	lns     map[net.Listener]struct{}
	open    map[net.Conn]*conn // by the accepted connection
	closing bool
	wg      sync.WaitGroup
}

func newTCPServer(cfg *config, target string, front func(net.Conn) net.Conn, dial func(context.Context, net.Conn) (net.Conn, error), policies [][]drain.Option) *tcpServer {
	t := &tcpServer{cfg: cfg, target: target, front: front, dial: dial,
		stop: make(chan struct{}), lns: map[net.Listener]struct{}{}, open: map[net.Conn]*conn{}}
	for _, opts := range policies {
		t.trackers = append(t.trackers, drain.NewTracker(t.drain, opts...))
	}
	return t
}

// newServerTCP is a Server's ModeTCP half.
func newServerTCP(s *Server) *tcpServer {
	var policies [][]drain.Option
	for i, p := range s.ids {
		policies = append(policies, append(s.drainOptions(p, i == 0), s.servedBy(i)))
	}
	front := func(raw net.Conn) net.Conn { return tls.Server(raw, s.tls) }
	return newTCPServer(&s.cfg, s.target.String(), front, s.dialBackend, policies)
}

// dialBackend completes the client's handshake, then dials the backend and sends
// it the PROXY protocol header if asked.
func (s *Server) dialBackend(ctx context.Context, front net.Conn) (net.Conn, error) {
	tc := front.(*tls.Conn)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, &handshakeError{err}
	}
	back, err := s.target.dial(ctx)
	if err != nil {
		return nil, err
	}
	if s.cfg.proxyProto {
		hdr, err := proxyHeader(tc)
		if err == nil {
			_, err = back.Write(hdr)
		}
		if err != nil {
			back.Close()
			return nil, fmt.Errorf("proxy: PROXY protocol header: %w", err)
		}
	}
	return back, nil
}

// handshakeError is a failed TLS handshake of a forwarded connection.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "TLS handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// drain ends a connection the policy picked: at once when its peer is no longer
// trusted, else once it is idle, within the grace period at the latest.
func (t *tcpServer) drain(tc *drain.Tracked, prompt bool) {
	t.mu.Lock()
	c := t.open[tc.Conn()]
	t.mu.Unlock()
	if c == nil {
		return
	}
	if prompt {
		c.close()
		return
	}
	t.drainOne(c)
}

// drainOne closes c once it is idle, within the grace period at the latest.
func (t *tcpServer) drainOne(c *conn) {
	limit := make(chan struct{})
	time.AfterFunc(t.cfg.grace, func() { close(limit) })
	c.closeWhenIdle(t.cfg.idle, limit)
}

func (t *tcpServer) serve(ln net.Listener) error {
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	t.lns[ln] = struct{}{}
	t.mu.Unlock()
	var delay time.Duration
	for {
		raw, err := ln.Accept()
		if err != nil {
			t.mu.Lock()
			closing := t.closing
			t.mu.Unlock()
			if closing {
				return ErrServerClosed
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
		t.mu.Lock()
		if t.closing {
			t.mu.Unlock()
			raw.Close()
			return ErrServerClosed
		}
		c := newConn(t.front(raw))
		t.open[raw] = c
		t.wg.Add(1)
		t.mu.Unlock()
		go t.handle(raw, c)
	}
}

func (t *tcpServer) handle(raw net.Conn, c *conn) {
	defer t.wg.Done()
	defer func() {
		t.mu.Lock()
		delete(t.open, raw)
		t.mu.Unlock()
	}()
	// Tracked before the handshake: the certificate recorded as served is never
	// newer than the one the handshake presents.
	tracked := make([]*drain.Tracked, len(t.trackers))
	for i, tr := range t.trackers {
		tracked[i] = tr.Track(raw)
	}
	defer func() {
		for _, tc := range tracked {
			tc.Done()
		}
	}()
	log, cfg := t.cfg.logger, t.cfg
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	back, err := t.dial(ctx, c.front)
	cancel()
	var he *handshakeError
	switch {
	case errors.As(err, &he):
		// A refused peer is worth a warning; a probe that connects and leaves
		// (a TCP health check) is not worth a line.
		level := log.Info
		switch {
		case errors.Is(err, ErrNotAllowed):
			level = log.Warn
		case errors.Is(err, io.EOF):
			level = log.Debug
		}
		level("proxy: TLS handshake failed", cfg.logKey, cfg.component, "remote", raw.RemoteAddr().String(), "error", he.err.Error())
	case err != nil:
		log.Warn("proxy: cannot connect to the target", cfg.logKey, cfg.component, "target", t.target, "error", err.Error())
	}
	if err != nil {
		c.close()
		return
	}
	// The peer is the TLS side: the client in front of a Server, the remote
	// behind a Client.
	for _, side := range []net.Conn{c.front, back} {
		if tc, ok := side.(*tls.Conn); ok {
			chain := hotcert.PeerChain(tc.ConnectionState()) // verified: the revocation cut matches serials with their issuer
			for _, tk := range tracked {
				tk.SetPeer(chain)
			}
			t.peers.add(c, chain)
			defer t.peers.remove(c)
			break
		}
	}
	if !c.setBack(back) {
		return
	}
	if age := cfg.maxAge; age > 0 {
		jittered := age - age/10 + randWithin(age/5)
		aged := time.AfterFunc(jittered, func() { t.drainOne(c) })
		defer aged.Stop()
	}
	c.pipe()
}

func (t *tcpServer) conns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// shutdown stops accepting, closes each connection once it is idle, and when ctx
// ends first closes what is left.
func (t *tcpServer) shutdown(ctx context.Context) error {
	t.mu.Lock()
	if !t.closing {
		t.closing = true
		close(t.stop)
	}
	for ln := range t.lns {
		ln.Close()
	}
	conns := make([]*conn, 0, len(t.open))
	for _, c := range t.open {
		conns = append(conns, c)
	}
	t.mu.Unlock()
	for _, tr := range t.trackers {
		tr.Close()
	}
	for _, c := range conns {
		c.closeWhenIdle(t.cfg.idle, ctx.Done())
	}
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.mu.Lock()
		for _, c := range t.open {
			c.close()
		}
		t.mu.Unlock()
		<-done
		return ctx.Err()
	}
}
