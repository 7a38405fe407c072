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
// is no longer acceptable, so its connection is closed. Pair it with
// tlsconfig.WithDenyList, which refuses the peer's reconnect.
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
			continue
		}
		err := next.Check(peer)
		if err == nil || !p.cut(t) {
			continue
		}
		p.cfg.observer.ObserveDrained(p.cfg.component, "revoked")
		p.cfg.observer.ObserveCut(p.cfg.component)
		p.cfg.logger.Warn("closing connection: peer certificate revoked",
			p.cfg.logKey, p.cfg.component, "remote", t.RemoteAddr().String(),
			"peer_subject", peer[0].Subject.String(), "peer_serial", hotcert.FormatSerial(peer[0].SerialNumber),
			"deny_list_version", next.Version(), "reason", err.Error())
	}
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

// peerChainOf is the peer's verified chain (leaf first, up to the root, so that a
// serial is matched with its issuer), or its presented certificates without one.
func peerChainOf(cs tls.ConnectionState) []*x509.Certificate {
	if len(cs.VerifiedChains) > 0 {
		return cs.VerifiedChains[0]
	}
	return cs.PeerCertificates
}
