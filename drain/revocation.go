package drain

import (
	"crypto/tls"
	"crypto/x509"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/revocation"
)

// DenyList is what the revocation cut follows: the deny list in use and its
// changes. A *revocation.Reloader is one.
type DenyList interface {
	Current() *revocation.List
	Subscribe(fn func(prev, next *revocation.List)) (unsubscribe func())
}

// WithRevocationCut closes, at once, every open connection whose peer chain the
// new list of d denies (its certificate revoked by serial or CRL, its key or a
// key of its chain listed), whenever the list changes; every other connection
// stays up. Unlike the trust cut, no GOAWAY lets in-flight RPCs finish: the peer
// is no longer acceptable, so its connection is closed, even one already in a
// GOAWAY drain's grace. Pair it with tlsconfig.WithDenyList, which refuses the
// peer's reconnect.
func WithRevocationCut(d DenyList) Option {
	return optionFunc(func(c *config) { c.deny = d })
}

// subscribeDeny follows the deny list, if one was given.
func (p *policy) subscribeDeny() []func() {
	if p.cfg.deny == nil {
		return nil
	}
	return []func(){p.cfg.deny.Subscribe(p.denyChanged)}
}

// denyChanged closes every connection whose peer next denies.
func (p *policy) denyChanged(_, next *revocation.List) {
	for _, t := range p.conns() {
		peer := t.peerChain()
		if len(peer) == 0 {
			if h, ok := t.(handshaker); ok {
				go p.checkAfterHandshake(t, h, next)
			}
			continue
		}
		p.cutIfDenied(t, peer, next)
	}
}

// handshaker is a target whose peer is not recorded until after its first
// request (an HTTP/1 connection): its TLS connection says who the peer is.
type handshaker interface{ tlsConn() *tls.Conn }

// checkAfterHandshake waits for h's handshake (ConnectionState waits for one that
// is running), then cuts t if next denies its peer: a handshake that completed
// before the list changed, whose peer no request has recorded yet. A handshake
// that starts later is checked against the new list by tlsconfig.
func (p *policy) checkAfterHandshake(t target, h handshaker, next *revocation.List) {
	tc := h.tlsConn()
	if tc == nil {
		return
	}
	if cs := tc.ConnectionState(); cs.HandshakeComplete {
		if peer := hotcert.PeerChain(cs); len(peer) > 0 {
			p.cutIfDenied(t, peer, next)
		}
	}
}

// checkNewPeer cuts t, whose peer was just recorded, if the list in use denies
// it: the list changed between the handshake's check and the recording.
func (p *policy) checkNewPeer(t target, peer []*x509.Certificate) {
	if p.cfg.deny == nil || len(peer) == 0 {
		return
	}
	p.cutIfDenied(t, peer, p.cfg.deny.Current())
}

// cutIfDenied closes t at once, with one log line and one count, when next
// denies peer.
func (p *policy) cutIfDenied(t target, peer []*x509.Certificate, next *revocation.List) {
	err := next.Check(peer)
	if err == nil || !p.cut(t) {
		return
	}
	p.cfg.observer.ObserveDrained(p.cfg.component, "revoked")
	p.cfg.observer.ObserveCut(p.cfg.component)
	p.cfg.logger.Warn("closing connection: peer certificate revoked",
		p.cfg.logKey, p.cfg.component, "remote", t.RemoteAddr().String(),
		"peer_subject", peer[0].Subject.String(), "peer_serial", hotcert.FormatSerial(peer[0].SerialNumber),
		"deny_list_version", next.Version(), "reason", err.Error())
}

// tlsConn is the connection's TLS side (nil for a plaintext one).
func (hc *httpConn) tlsConn() *tls.Conn {
	tc, _ := hc.c.(*tls.Conn)
	return tc
}

// cut closes hc at once, whatever it is doing.
func (h *HTTPServer) cut(hc *httpConn) bool {
	hc.mu.Lock()
	already := hc.cutDone
	hc.cutDone, hc.stale, hc.prompt = true, true, true
	hc.mu.Unlock()
	if already {
		return false
	}
	hc.c.Close()
	return true
}
