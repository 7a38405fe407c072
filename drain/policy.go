package drain

import (
	"crypto/x509"
	"time"

	"github.com/hotcert/hotcert"
)

// identityChanged schedules the drain of every connection established under a
// certificate other than next's, at uniformly random offsets within the window.
func (s *Server) identityChanged(prev, next *hotcert.Material) {
	if !next.HasIdentity() || (prev.HasIdentity() && prev.LeafFingerprint() == next.LeafFingerprint()) {
		return // only the trust bundle changed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	var old []*conn
	for c := range s.conns {
		c.mu.Lock()
		stale := c.identity != nil && c.identity.LeafFingerprint() != next.LeafFingerprint()
		c.mu.Unlock()
		if stale {
			old = append(old, c)
		}
	}
	if len(old) == 0 {
		return
	}
	s.cfg.metrics.drainStarted(s.cfg.component)
	s.cfg.logger.Info("draining connections onto the new certificate",
		"component", s.cfg.component, "connections", len(old), "window", s.cfg.window.String(),
		"sha256", next.LeafFingerprint().String())
	for _, c := range old {
		delay := time.Duration(s.cfg.randFloat64() * float64(s.cfg.window))
		var t *time.Timer
		t = time.AfterFunc(delay, func() {
			s.mu.Lock()
			delete(s.timers, t)
			s.mu.Unlock()
			if s.drainConn(c) {
				s.cfg.metrics.connDrained(s.cfg.component, "identity")
			}
		})
		s.timers[t] = struct{}{}
	}
}

// trustChanged drains, at once, every connection whose peer chain does not verify
// against next's bundle.
func (s *Server) trustChanged(_, next *hotcert.Material) {
	pool := next.TrustPool()
	if pool == nil {
		return // a bundle-less material cannot be what the server verifies against
	}
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	now := time.Now()
	for _, c := range conns {
		c.mu.Lock()
		peer := c.peer
		c.mu.Unlock()
		if len(peer) == 0 {
			continue // no client certificate: nothing to re-verify
		}
		err := verifyPeer(peer, pool, now)
		if err == nil {
			continue
		}
		if s.drainConn(c) {
			s.cfg.metrics.cut(s.cfg.component)
			s.cfg.logger.Warn("closing connection: peer certificate no longer trusted",
				"component", s.cfg.component, "remote", c.RemoteAddr().String(),
				"peer_subject", peer[0].Subject.String(), "peer_serial", peer[0].SerialNumber.Text(16),
				"reason", err.Error())
		}
	}
}

// verifyPeer verifies a client's chain (leaf first, then what it sent as
// intermediates) for client authentication against pool at now.
func verifyPeer(peer []*x509.Certificate, pool *x509.CertPool, now time.Time) error {
	inter := x509.NewCertPool()
	for _, ic := range peer[1:] {
		inter.AddCert(ic)
	}
	_, err := peer[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}
