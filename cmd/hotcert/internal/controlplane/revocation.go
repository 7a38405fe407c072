package controlplane

import (
	"crypto/x509"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
)

// loadDenyList, with Config.DenyList, loads the deny list whose CRLs are checked
// against the client CA bundle (component Component+"_deny_list").
func (s *Server) loadDenyList() error {
	if s.cfg.DenyList == nil {
		return nil
	}
	opts := []revocation.Option{hotcert.WithComponent(s.cfg.Component + "_deny_list"), hotcert.WithComponentLabel(s.cfg.ComponentKey),
		hotcert.WithLogger(s.log), revocation.WithStalePolicy(s.cfg.StaleCRLPolicy)}
	for _, o := range s.cfg.ReloaderOptions {
		if ro, ok := o.(hotcert.ReloadOption); ok {
			opts = append(opts, ro)
		}
	}
	var m *metrics.DenyList
	if s.cfg.Registerer != nil {
		var err error
		if m, err = metrics.NewDenyList(s.cfg.Registerer, s.cfg.MetricsOptions...); err != nil {
			return fmt.Errorf("controlplane: %w", err)
		}
		opts = append(opts, revocation.WithObserver(m))
	}
	var err error
	if s.deny, err = revocation.New(s.reloadCtx, s.cfg.DenyList, s.clientCA, opts...); err != nil {
		return fmt.Errorf("controlplane: deny list: %w", err)
	}
	if m != nil {
		// The count /healthz's denied_connections says, at each scrape: what the
		// census reads to prove no connection of a revoked certificate is left.
		m.CountDenied(s.cfg.Component+"_deny_list", func() int { return s.deniedConns(s.deny.Current()) })
	}
	return nil
}

// deniedConns counts the open agent connections whose verified peer chain l denies.
func (s *Server) deniedConns(l *revocation.List) int {
	return agentrpc.DeniedConnections(l, s.peerChains)
}

// peerChains yields the verified peer chain of every open agent connection.
func (s *Server) peerChains(yield func([]*x509.Certificate) bool) {
	more := true
	s.peers.each(func(chain []*x509.Certificate) { more = more && yield(chain) })
}

// DenyList returns the deny list's reloader, or nil without Config.DenyList.
func (s *Server) DenyList() *revocation.Reloader { return s.deny }

// denyListStatus describes the deny list, answering for serial when not "" (of
// issuer when not "").
func (s *Server) denyListStatus(serial, issuer string) (*agentrpc.DenyListStatus, error) {
	if s.deny == nil {
		return nil, nil
	}
	return agentrpc.NewDenyListStatus(s.deny, serial, issuer, s.peerChains)
}

// peerTracker holds the verified peer chain of every open connection whose
// handshake succeeded, until the connection closes.
type peerTracker struct {
	mu    sync.Mutex
	conns map[*peerConn][]*x509.Certificate
}

type peerConn struct {
	net.Conn
	t    *peerTracker
	once sync.Once
}

// track wraps conn, whose handshake verified info's peer, so that the tracker
// holds its chain until it closes. A connection without a client certificate is
// not tracked.
func (t *peerTracker) track(conn net.Conn, info credentials.AuthInfo) net.Conn {
	ti, ok := info.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return conn
	}
	chain := hotcert.PeerChain(ti.State)
	pc := &peerConn{Conn: conn, t: t}
	t.mu.Lock()
	if t.conns == nil {
		t.conns = map[*peerConn][]*x509.Certificate{}
	}
	t.conns[pc] = chain
	t.mu.Unlock()
	return pc
}

func (c *peerConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

func (t *peerTracker) each(f func(chain []*x509.Certificate)) {
	t.mu.Lock()
	chains := make([][]*x509.Certificate, 0, len(t.conns))
	for _, c := range t.conns {
		chains = append(chains, c)
	}
	t.mu.Unlock()
	for _, c := range chains {
		f(c)
	}
}
