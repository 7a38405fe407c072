package drain

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
)

// HTTPServer applies the same drain policies as [Server] to a net/http server:
// connections opened under a previous certificate, or whose client certificate no
// longer verifies, are asked to reconnect. A connection that is idle is closed; a
// busy one gets "Connection: close" on its next response, which ends an HTTP/1
// connection after that response and makes Go's HTTP/2 server send a GOAWAY (in-flight
// streams finish). After the grace period the connection is closed regardless.
// Create it with [NewHTTPServer] and attach it with [HTTPServer.Wrap].
type HTTPServer struct {
	cfg config

	mu     sync.Mutex
	conns  map[net.Conn]*httpConn
	timers map[*time.Timer]struct{}
	unsubs []func()
	closed bool
	expiry *expiry // WithExpiryDrain; nil: off
}

type httpConn struct {
	c        net.Conn
	identity *hotcert.Material // material current when the connection was accepted

	mu      sync.Mutex
	state   http.ConnState
	peer    []*x509.Certificate
	h2      bool // the connection negotiated HTTP/2
	tlsSeen bool // its TLS state was read (and its expiry drain planned)
	stale   bool
	prompt  bool // stale because its peer is no longer trusted: close as soon as idle
	cutDone bool // closed by the revocation cut
}

// h2IdleClose is how long a stale HTTP/2 connection that just went idle stays open
// before it is closed, so that its last response reaches the client first (Go's own
// HTTP/2 server approximates one round trip with a second for the same reason,
// golang.org/issue/18701).
const h2IdleClose = time.Second

type httpConnKey struct{}

// NewHTTPServer returns the policies given by opts (WithIdentityDrain, WithTrustCut,
// WithGrace, WithLogger, WithObserver, WithComponent, WithComponentLabel) for a
// net/http server.
func NewHTTPServer(opts ...Option) *HTTPServer {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	h := &HTTPServer{cfg: cfg, conns: map[net.Conn]*httpConn{}, timers: map[*time.Timer]struct{}{}}
	p := &policy{cfg: &h.cfg, conns: h.targets, after: h.after,
		drain: func(t target, prompt bool) bool { return h.markStale(t.(*httpConn), prompt) },
		cut:   func(t target) bool { return h.cut(t.(*httpConn)) }}
	h.unsubs = p.subscribe()
	h.expiry = newExpiry(&h.cfg, func(t target, _ string) bool { return h.markStale(t.(*httpConn), false) })
	return h
}

func (hc *httpConn) netConn() net.Conn { return hc.c }

func (hc *httpConn) servedIdentity() *hotcert.Material { return hc.identity }

func (hc *httpConn) peerChain() []*x509.Certificate {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return hc.peer
}

func (hc *httpConn) RemoteAddr() net.Addr { return hc.c.RemoteAddr() }

// Wrap installs the hooks on srv (ConnContext, ConnState and the handler, keeping
// those srv already has). Call it before srv serves.
func (h *HTTPServer) Wrap(srv *http.Server) {
	prevCtx, prevState, next := srv.ConnContext, srv.ConnState, srv.Handler
	if next == nil {
		next = http.DefaultServeMux
	}
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		hc := &httpConn{c: c, state: http.StateNew}
		if h.cfg.identity != nil {
			hc.identity = h.cfg.identity.Current()
		}
		h.mu.Lock()
		h.conns[c] = hc
		h.mu.Unlock()
		ctx = context.WithValue(ctx, httpConnKey{}, hc)
		if prevCtx != nil {
			ctx = prevCtx(ctx, c)
		}
		return ctx
	}
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		h.connState(c, st)
		if prevState != nil {
			prevState(c, st)
		}
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hc, _ := r.Context().Value(httpConnKey{}).(*httpConn); hc != nil {
			hc.mu.Lock()
			stale := hc.stale
			if hc.peer == nil && r.TLS != nil {
				hc.peer = hotcert.PeerChain(*r.TLS)
			}
			hc.mu.Unlock()
			if stale {
				w.Header().Set("Connection", "close") // HTTP/1: close after this response; HTTP/2: GOAWAY
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (h *HTTPServer) connState(c net.Conn, st http.ConnState) {
	h.mu.Lock()
	hc := h.conns[c]
	if st == http.StateClosed || st == http.StateHijacked {
		delete(h.conns, c)
	}
	h.mu.Unlock()
	if hc == nil {
		return
	}
	if st == http.StateClosed || st == http.StateHijacked {
		h.expiry.forget(hc)
	}
	hc.mu.Lock()
	hc.state = st
	var handshaken []*x509.Certificate // the verified peer chain, on the first request
	first := false
	if !hc.tlsSeen && (st == http.StateActive || st == http.StateIdle) {
		if tc, ok := c.(*tls.Conn); ok {
			cs := tc.ConnectionState()
			hc.tlsSeen, first = true, true
			handshaken = hotcert.PeerChain(cs) // the verified chain when there is one
			if hc.peer == nil {
				hc.peer = handshaken
			}
			hc.h2 = cs.NegotiatedProtocol == "h2"
		}
	}
	wentIdle, h2, prompt := hc.stale && st == http.StateIdle, hc.h2, hc.prompt
	hc.mu.Unlock()
	if first {
		h.expiry.schedule(hc, handshaken)
	}
	switch {
	case !wentIdle:
	case h2 && !prompt:
		// A drain onto a new certificate: the next response sends a GOAWAY, and
		// the grace period ends what no request came for. Closing an idle HTTP/2
		// connection could cut a request the client is sending at that moment.
	case !h2:
		c.Close() // HTTP/1: the response is flushed once the connection is idle
	default:
		h.after(h2IdleClose, func() {
			hc.mu.Lock()
			idle := hc.state == http.StateIdle
			hc.mu.Unlock()
			if idle {
				c.Close()
			}
		})
	}
}

// markStale asks hc to reconnect: an idle HTTP/1 connection (or, when prompt, any
// idle connection) is closed at once, a busy one at its next response (HTTP/1) or by
// a GOAWAY then (HTTP/2), and every one after the grace period at the latest.
func (h *HTTPServer) markStale(hc *httpConn, prompt bool) bool {
	hc.mu.Lock()
	if hc.stale {
		hc.mu.Unlock()
		return false
	}
	hc.stale, hc.prompt = true, prompt
	idle := hc.state == http.StateIdle && (!hc.h2 || prompt)
	hc.mu.Unlock()
	if idle {
		hc.c.Close()
		return true
	}
	h.after(h.cfg.grace, func() { hc.c.Close() })
	return true
}

func (h *HTTPServer) after(d time.Duration, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		h.mu.Lock()
		delete(h.timers, t)
		h.mu.Unlock()
		f()
	})
	h.timers[t] = struct{}{}
}

// targets returns the open connections, for the policy.
func (h *HTTPServer) targets() []target {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]target, 0, len(h.conns))
	for _, hc := range h.conns {
		out = append(out, hc)
	}
	return out
}

// Close stops following changes and cancels pending drains.
func (h *HTTPServer) Close() {
	h.mu.Lock()
	h.closed = true
	for t := range h.timers {
		t.Stop()
	}
	unsubs := h.unsubs
	h.unsubs = nil
	h.mu.Unlock()
	h.expiry.close()
	for _, u := range unsubs {
		u()
	}
}
