package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/tlsconfig"
)

// Client accepts plaintext connections from a local program and originates TLS
// (mTLS when its provider holds a certificate) to a remote service. Create it with
// [NewClient], run it with [Client.Serve], end it with [Client.Shutdown].
type Client struct {
	cfg     config
	remote  string
	id      hotcert.Provider
	dialer  *tlsconfig.Dialer
	serving atomic.Bool

	tcp  *tcpServer // ModeTCP
	http *httpClient
}

// NewClient returns a Client that connects to remote (host:port) presenting the
// certificate of id, if it holds one, and verifying the remote against id's bundle
// or the one of WithTrust, by the remote's host name or WithServerName; when that
// bundle changes, connections to a remote it no longer trusts are cut at once (a
// Server cuts its peers so). When id's
// certificate rotates, connections opened under the previous one move onto the new
// one over the drain window: in ModeTCP once idle, in ModeHTTP as requests finish.
func NewClient(remote string, id hotcert.Provider, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if id == nil {
		return nil, errors.New("proxy: no provider for the client's certificate and trust")
	}
	if cfg.peerHeader != "" || cfg.proxyProto || cfg.backendH2C {
		return nil, errors.New("proxy: peer headers, the PROXY protocol and h2c backends are for a Server")
	}
	if _, _, err := net.SplitHostPort(remote); err != nil {
		return nil, errors.New("proxy: remote " + remote + ": want host:port")
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: cfg.nextProtos}
	if cfg.mode == ModeHTTP {
		base.NextProtos = []string{"h2", "http/1.1"}
	}
	base.VerifyConnection = cfg.allow.verify
	topts := []tlsconfig.Option{tlsconfig.WithBase(base), tlsconfig.WithServerName(cfg.serverName)}
	if cfg.trust != nil {
		topts = append(topts, tlsconfig.WithTrust(cfg.trust))
	}
	topts = append(topts, cfg.denyTLS()...)
	c := &Client{cfg: cfg, remote: remote, id: id, dialer: tlsconfig.NewDialer(id, topts...)}
	if cfg.mode == ModeHTTP {
		c.http = newHTTPClient(c)
		return c, nil
	}
	policy := c.cfg.drainOptions()
	if dp, ok := id.(drain.Provider); ok {
		policy = append(policy, drain.WithIdentityDrain(dp, cfg.window))
	}
	// The trust cut: a remote whose chain no longer verifies against the bundle
	// (WithTrust's, else id's) is cut at once, as the Server cuts its peers.
	if tp, ok := c.trustProvider(); ok {
		policy = append(policy, drain.WithServerTrustCut(tp))
	}
	policy = append(policy, cfg.revocationCut()...)
	dial := func(ctx context.Context, _ net.Conn) (net.Conn, error) {
		return c.dialer.DialContext(ctx, "tcp", remote)
	}
	c.tcp = newTCPServer(&c.cfg, remote, func(raw net.Conn) net.Conn { return raw }, dial, [][]drain.Option{policy})
	return c, nil
}

// trustProvider is the provider of the bundle the remote is verified against,
// when it reports its changes.
func (c *Client) trustProvider() (drain.Provider, bool) {
	trust := c.cfg.trust
	if trust == nil {
		trust = c.id
	}
	tp, ok := trust.(drain.Provider)
	return tp, ok
}

// Serve accepts plaintext connections on ln until Shutdown; it returns
// ErrServerClosed after Shutdown.
func (c *Client) Serve(ln net.Listener) error {
	c.serving.Store(true)
	defer c.serving.Store(false)
	if c.http != nil {
		err := c.http.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return ErrServerClosed
		}
		return err
	}
	return c.tcp.serve(ln)
}

// Serving reports whether Serve is accepting connections.
func (c *Client) Serving() bool { return c.serving.Load() }

// Shutdown stops accepting and ends the open connections gracefully, as
// [Server.Shutdown] does.
func (c *Client) Shutdown(ctx context.Context) error {
	if c.http != nil {
		return c.http.shutdown(ctx)
	}
	return c.tcp.shutdown(ctx)
}

// ClientStatus says what a Client holds, for a status endpoint.
type ClientStatus struct {
	Mode    Mode             `json:"mode"`
	Remote  string           `json:"remote"`
	Serving bool             `json:"serving"`
	Held    hotcert.Summary  `json:"held"`
	Trust   *hotcert.Summary `json:"trust,omitempty"`
}

// Status returns the Client's status.
func (c *Client) Status() ClientStatus {
	st := ClientStatus{Mode: c.cfg.mode, Remote: c.remote, Serving: c.Serving(), Held: c.id.Current().Summary()}
	if c.cfg.trust != nil {
		sum := c.cfg.trust.Current().Summary()
		st.Trust = &sum
	}
	return st
}

// httpClient is a Client's ModeHTTP half: a plaintext http.Server (HTTP/1.1 and
// h2c, for local gRPC clients) whose ReverseProxy sends every request over TLS
// (HTTP/2 when the remote offers it). When the certificate or trust changes, new
// requests go to a new http.Transport, and the previous one's connections close as
// their requests finish.
type httpClient struct {
	c     *Client
	srv   *http.Server
	tr    atomic.Pointer[http.Transport]
	cut   *drain.Tracker // the trust and revocation cuts; nil without either
	peers peerSet        // the remotes of the connections cut tracks
	stop  func()
	mu    sync.Mutex
	timer map[*time.Timer]struct{}
}

func newHTTPClient(c *Client) *httpClient {
	h := &httpClient{c: c, timer: map[*time.Timer]struct{}{}}
	cuts := c.cfg.revocationCut()
	if tp, ok := c.trustProvider(); ok {
		cuts = append(cuts, drain.WithServerTrustCut(tp))
	}
	if len(cuts) > 0 {
		h.cut = drain.NewTracker(func(tc *drain.Tracked, _ bool) { tc.Conn().Close() },
			append(c.cfg.drainOptions(), cuts...)...)
	}
	h.tr.Store(h.newTransport())
	u := &url.URL{Scheme: "https", Host: c.remote}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport: h,
		ErrorLog:  slog.NewLogLogger(c.cfg.logger.Handler(), slog.LevelWarn),
	}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	h.srv = &http.Server{Handler: rp, Protocols: &protos, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(c.cfg.logger.Handler(), slog.LevelInfo)}
	h.stop = c.dialer.Notify(h.rotate)
	return h
}

func (h *httpClient) newTransport() *http.Transport {
	return &http.Transport{
		DialTLSContext:      h.dialTLS,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
	}
}

// dialTLS is the Dialer's DialContext with the connection tracked for the trust
// cut. The transport gets the *tls.Conn itself (it negotiates HTTP/2 only on one);
// the connection beneath it says when it closes.
func (h *httpClient) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	if h.cut == nil {
		return h.c.dialer.DialContext(ctx, network, addr)
	}
	cfg, err := h.c.dialer.Config(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("proxy: dial %s: %w", addr, err)
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	under := &trackedConn{Conn: raw, peers: &h.peers}
	tc := tls.Client(under, cfg)
	under.tracked = h.cut.Track(tc) // before the handshake, as Track asks
	if err := tc.HandshakeContext(ctx); err != nil {
		tc.Close()
		return nil, err
	}
	chain := hotcert.PeerChain(tc.ConnectionState()) // verified: the revocation cut matches serials with their issuer
	h.peers.add(under, chain)
	under.tracked.SetPeer(chain)
	return tc, nil
}

// trackedConn ends its tracking when it closes.
type trackedConn struct {
	net.Conn
	tracked *drain.Tracked
	peers   *peerSet
	once    sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.tracked.Done(); c.peers.remove(c) })
	return c.Conn.Close()
}

func (h *httpClient) RoundTrip(r *http.Request) (*http.Response, error) {
	return h.tr.Load().RoundTrip(r)
}

// rotate moves new requests to a fresh transport after a random delay within the
// window, and closes the previous transport's connections as they go idle, until
// the grace period ends.
func (h *httpClient) rotate() {
	h.after(randWithin(h.c.cfg.window), func() {
		old := h.tr.Swap(h.newTransport())
		old.CloseIdleConnections()
		deadline := time.Now().Add(h.c.cfg.grace)
		var sweep func()
		sweep = func() {
			old.CloseIdleConnections()
			if time.Now().Before(deadline) {
				h.after(h.c.cfg.idle, sweep)
			}
		}
		h.after(h.c.cfg.idle, sweep)
		h.c.cfg.logger.Info("proxy: new connections to the remote use the new material",
			h.c.cfg.logKey, h.c.cfg.component, "remote", h.c.remote)
	})
}

func (h *httpClient) after(d time.Duration, f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer == nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		h.mu.Lock()
		delete(h.timer, t)
		h.mu.Unlock()
		f()
	})
	h.timer[t] = struct{}{}
}

func (h *httpClient) shutdown(ctx context.Context) error {
	h.stop()
	if h.cut != nil {
		h.cut.Close()
	}
	err := h.srv.Shutdown(ctx)
	if err != nil {
		h.srv.Close()
	}
	h.mu.Lock()
	for t := range h.timer {
		t.Stop()
	}
	h.timer = nil
	h.mu.Unlock()
	h.tr.Load().CloseIdleConnections()
	return err
}
