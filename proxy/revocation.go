package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"sync"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/tlsconfig"
)

// WithDenyList enforces the deny list of d (a *revocation.Reloader is one:
// revoked serials per issuer, SPKI hashes, CRLs): a peer whose verified chain the
// list in use denies is refused at every handshake, full or resumed, and when the
// list changes, every open connection whose peer the new list denies is closed at
// once (no drain window, no grace: the peer is no longer acceptable) while every
// other connection stays up — HTTP/1.1, HTTP/2 and gRPC connections in [ModeHTTP],
// forwarded connections in [ModeTCP]. A [Server] applies it to client certificates
// (it needs WithTrust), a [Client] to the remote's certificate.
func WithDenyList(d drain.DenyList) Option { return optionFunc(func(c *config) { c.deny = d }) }

// errDenyWithoutTrust refuses a Server deny list without client certificates.
var errDenyWithoutTrust = errors.New("proxy: a deny list revokes client certificates: give the client CA bundle (WithTrust)")

// denyTLS is the handshake half of WithDenyList.
func (c *config) denyTLS() []tlsconfig.Option {
	if c.deny == nil {
		return nil
	}
	return []tlsconfig.Option{tlsconfig.WithDenyList(c.deny)}
}

// revocationCut is the live half of WithDenyList, for one policy set.
func (c *config) revocationCut() []drain.Option {
	if c.deny == nil {
		return nil
	}
	return []drain.Option{drain.WithRevocationCut(c.deny)}
}

// peerSet holds the peer chain of every open connection whose handshake
// verified one, for Peers.
type peerSet struct {
	mu sync.Mutex
	m  map[any][]*x509.Certificate
}

func (p *peerSet) add(k any, chain []*x509.Certificate) {
	if len(chain) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[any][]*x509.Certificate{}
	}
	p.m[k] = chain
}

func (p *peerSet) remove(k any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, k)
}

// each calls f with each chain, outside the lock (an iter.Seq).
func (p *peerSet) each(f func([]*x509.Certificate) bool) {
	p.mu.Lock()
	chains := make([][]*x509.Certificate, 0, len(p.m))
	for _, c := range p.m {
		chains = append(chains, c)
	}
	p.mu.Unlock()
	for _, c := range chains {
		if !f(c) {
			return
		}
	}
}

// trackPeers records the peer of each connection of h once its handshake is
// done (the first request, or HTTP/2's preface), until it closes.
func (h *httpServer) trackPeers() {
	prev := h.srv.ConnState
	h.srv.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateActive, http.StateIdle:
			if tc, ok := c.(*tls.Conn); ok {
				if cs := tc.ConnectionState(); cs.HandshakeComplete {
					h.peers.add(c, hotcert.PeerChain(cs))
				}
			}
		case http.StateClosed, http.StateHijacked:
			h.peers.remove(c)
		}
		if prev != nil {
			prev(c, st)
		}
	}
}

// Peers yields the verified peer chain (leaf first) of every open connection
// whose handshake presented one: the clients of a Server with WithTrust (in
// [ModeHTTP], from the connection's first request, or HTTP/2's preface, on). A
// status page counts with it which open connections a deny list denies (0 once
// the live cut has ended them).
func (s *Server) Peers(yield func([]*x509.Certificate) bool) {
	if s.http != nil {
		s.http.peers.each(yield)
		return
	}
	s.tcp.peers.each(yield)
}

// Peers yields the verified chain (leaf first) of the remote on every open
// connection a cut tracks (every one with WithDenyList, or a bundle that reports
// its changes).
func (c *Client) Peers(yield func([]*x509.Certificate) bool) {
	if c.http != nil {
		c.http.peers.each(yield)
		return
	}
	c.tcp.peers.each(yield)
}
