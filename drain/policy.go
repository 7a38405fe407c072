package drain

import (
	"crypto/x509"
	"math/rand/v2"
	"net"
	"time"

	"github.com/hotcert/hotcert"
)

// target is one connection as the drain policy sees it. The gRPC [Server] and the
// [HTTPServer] each track their own kind of connection; the policy is written once.
type target interface {
	// servedIdentity is the Material current when the connection's handshake
	// began (nil when identity drains are off).
	servedIdentity() *hotcert.Material
	// peerChain is the peer's certificate chain, leaf first (nil without a client
	// certificate).
	peerChain() []*x509.Certificate
	RemoteAddr() net.Addr
	// netConn is the connection as the server accepted it, for WithServedBy.
	netConn() net.Conn
}

// policy decides which connections to drain when the material changes and when;
// the server it belongs to says how a connection is drained.
type policy struct {
	cfg *config
	// conns returns the open connections.
	conns func() []target
	// after runs f after d, unless the server stops first.
	after func(d time.Duration, f func())
	// drain asks t to reconnect: onto a new certificate (prompt false), or at once
	// because its peer is no longer trusted (prompt true). It returns false when t
	// is already being drained.
	drain func(t target, prompt bool) bool
	// cut closes t at once (its peer is revoked); false when t is already going.
	cut func(t target) bool
}

// subscribe follows the providers the options name; it returns the unsubscribers.
func (p *policy) subscribe() []func() {
	var unsubs []func()
	if p.cfg.identity != nil {
		unsubs = append(unsubs, p.cfg.identity.Subscribe(p.identityChanged))
	}
	if p.cfg.trust != nil {
		unsubs = append(unsubs, p.cfg.trust.Subscribe(p.trustChanged))
	}
	return append(unsubs, p.subscribeDeny()...)
}

// identityChanged schedules the drain of every connection established under a
// certificate other than next's, at uniformly random offsets within the window.
func (p *policy) identityChanged(prev, next *hotcert.Material) {
	if !next.HasIdentity() || prev.SameIdentity(next) {
		return // only the trust bundle changed
	}
	var old []target
	for _, t := range p.conns() {
		if id := t.servedIdentity(); id != nil && !id.SameIdentity(next) && p.servedBy(t) {
			old = append(old, t)
		}
	}
	if len(old) == 0 {
		return
	}
	p.cfg.observer.ObserveDrainStarted(p.cfg.component)
	p.cfg.logger.Info("draining connections onto the new certificate",
		p.cfg.logKey, p.cfg.component, "connections", len(old), "window", p.cfg.window.String(),
		"serial", hotcert.FormatSerial(next.Leaf().SerialNumber), "sha256", next.LeafFingerprint().String())
	for _, t := range old {
		p.after(time.Duration(rand.Float64()*float64(p.cfg.window)), func() {
			if p.drain(t, false) {
				p.cfg.observer.ObserveDrained(p.cfg.component, "identity")
			}
		})
	}
}

// servedBy reports whether t's handshake served the identity this policy follows
// (always, without WithServedBy).
func (p *policy) servedBy(t target) bool {
	return p.cfg.servedBy == nil || p.cfg.servedBy(t.netConn())
}

// trustChanged drains, at once, every connection whose peer chain does not verify
// for client authentication (server authentication with WithServerTrustCut)
// against next's bundle.
func (p *policy) trustChanged(_, next *hotcert.Material) {
	pool := next.TrustPool()
	if pool == nil {
		return // a bundle-less material cannot be what the server verifies against
	}
	now := time.Now()
	usage := x509.ExtKeyUsageClientAuth
	if p.cfg.trustServer {
		usage = x509.ExtKeyUsageServerAuth
	}
	for _, t := range p.conns() {
		peer := t.peerChain()
		if len(peer) == 0 {
			continue // no client certificate: nothing to re-verify
		}
		_, err := hotcert.VerifyChain(peer, x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
		if err == nil || !p.drain(t, true) {
			continue
		}
		p.cfg.observer.ObserveDrained(p.cfg.component, "trust")
		p.cfg.observer.ObserveCut(p.cfg.component)
		p.cfg.logger.Warn("closing connection: peer certificate no longer trusted",
			p.cfg.logKey, p.cfg.component, "remote", t.RemoteAddr().String(),
			"peer_subject", peer[0].Subject.String(), "peer_serial", hotcert.FormatSerial(peer[0].SerialNumber),
			"reason", err.Error())
	}
}
