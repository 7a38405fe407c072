package drain

import "github.com/hotcert/hotcert/revocation"

// DeniedConns counts the open connections whose peer chain l denies: with l the
// list in use (a revocation.Reloader's Current), 0 once the revocation cut has
// closed them — the server's own evidence that no connection of a revoked
// certificate is left. It checks every open connection (a few hashes each): call
// it when asked, e.g. from metrics.DenyList.CountDenied at a scrape, not per
// request. A nil list denies nothing.
func (s *Server) DeniedConns(l *revocation.List) int { return deniedConns(s.targets(), l) }

// DeniedConns is [Server.DeniedConns] for the HTTP server's connections.
func (h *HTTPServer) DeniedConns(l *revocation.List) int { return deniedConns(h.targets(), l) }

func deniedConns(ts []target, l *revocation.List) int {
	if l == nil {
		return 0
	}
	n := 0
	for _, t := range ts {
		if c, ok := t.(interface{ gone() bool }); ok && c.gone() {
			continue // closed, not yet forgotten
		}
		if peer := t.peerChain(); len(peer) > 0 && l.Check(peer) != nil {
			n++
		}
	}
	return n
}

// gone reports whether the connection was closed (it stays among the server's
// connections until its clean-up ran).
func (c *conn) gone() bool { return c.closed.Load() }

// gone reports whether the revocation cut closed the connection.
func (hc *httpConn) gone() bool {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return hc.cutDone
}
