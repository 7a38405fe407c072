package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotcert/hotcert/drain"
)

// httpServer is a Server's ModeHTTP half: an http.Server with TLS from the
// Server's config, an httputil.ReverseProxy to the backend, and one drain policy
// set per identity.
type httpServer struct {
	s      *Server
	srv    *http.Server
	drains []*drain.HTTPServer
	h1     *http.Transport
	h1d    *h1Direct
	h2c    *http.Transport
	open   atomic.Int64
	peers  peerSet // the verified clients of the open connections
}

func newHTTPServer(s *Server) *httpServer {
	h := &httpServer{s: s, h1: backendTransport(s.target, false), h2c: backendTransport(s.target, true), h1d: &h1Direct{target: s.target, max: 256}}
	rp := &httputil.ReverseProxy{
		Rewrite:    h.rewrite,
		Transport:  h,
		BufferPool: copyBuffers, // without a pool, every response allocates (and clears) 32 KiB
		// FlushInterval 0: ReverseProxy flushes every write of a response without
		// a length (gRPC, server-sent events, any stream) at once, and buffers
		// the others (measured: -1 costs small responses a flush each).
		ErrorLog: slog.NewLogLogger(s.cfg.logger.Handler(), slog.LevelWarn),
	}
	h.srv = &http.Server{
		Handler:           rp,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.cfg.logger.Handler(), slog.LevelInfo),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				h.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				h.open.Add(-1)
			}
		},
	}
	h.trackPeers()
	// One policy set per identity: a rotation of an identity drains the
	// connections its handshakes served before it (servedBy); the trust and
	// revocation cuts run once, over every connection.
	for i, p := range s.ids {
		d := drain.NewHTTPServer(append(s.drainOptions(p, i == 0), s.servedBy(i))...)
		d.Wrap(h.srv)
		h.drains = append(h.drains, d)
	}
	return h
}

// copyBuffers are ReverseProxy's response copy buffers, shared by every Server.
var copyBuffers = &bufferPool{}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return *buf
	}
	return make([]byte, 32<<10) // ReverseProxy's own size
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// backendTransport dials the backend in plaintext, HTTP/1.1 or h2c.
func backendTransport(t Target, h2c bool) *http.Transport {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return t.dial(ctx) },
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// The client's Accept-Encoding goes to the backend as sent: the transport
		// neither adds gzip nor decompresses (a proxy passes bodies through).
		DisableCompression: true,
	}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return tr
}

// RoundTrip sends gRPC (and, with WithBackendH2C, everything) over h2c, the rest
// over HTTP/1.1.
func (h *httpServer) RoundTrip(r *http.Request) (*http.Response, error) {
	if h.s.cfg.backendH2C || r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		return h.h2c.RoundTrip(r)
	}
	if h.h1d.direct(r) {
		return h.h1d.RoundTrip(r)
	}
	return h.h1.RoundTrip(r)
}

var backendURL = &url.URL{Scheme: "http", Host: "localhost"}

func (h *httpServer) rewrite(pr *httputil.ProxyRequest) {
	u := *backendURL
	if h.s.target.Network == "tcp" {
		u.Host = h.s.target.Address
	}
	pr.SetURL(&u)
	pr.Out.Host = pr.In.Host // the backend sees the name the client asked for
	pr.SetXForwarded()
	// Never forward a client's own claim of who it is: only the proxy's. (The
	// names are canonical: deleting from the map skips canonicalizing them.)
	delete(pr.Out.Header, DefaultPeerHeader)
	if name := h.s.cfg.peerHeader; name != "" {
		delete(pr.Out.Header, name)
		if pr.In.TLS != nil && len(pr.In.TLS.PeerCertificates) > 0 {
			pr.Out.Header.Set(name, peerHeaderValue(pr.In.TLS.PeerCertificates[0]))
		}
	}
}

func (h *httpServer) conns() int { return int(h.open.Load()) }

// shutdown is http.Server.Shutdown (HTTP/1: close after the response; HTTP/2:
// GOAWAY, streams finish), then the drain policies stop.
func (h *httpServer) shutdown(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		h.srv.Close()
	}
	for _, d := range h.drains {
		d.Close()
	}
	h.h1.CloseIdleConnections()
	h.h1d.closeIdle()
	h.h2c.CloseIdleConnections()
	return err
}
