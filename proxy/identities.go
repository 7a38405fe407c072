package proxy

import (
	"bytes"
	"crypto/tls"
	"net"
	"sync/atomic"

	"github.com/hotcert/hotcert/drain"
)

// A Server with several identities gives each its own drain policy set. So that a
// rotation of one identity drains only the connections that were served it, every
// accepted connection remembers which identity its handshake chose.

// servedConn is an accepted connection of a Server with several identities.
type servedConn struct {
	net.Conn
	chosen atomic.Int32 // 1 + the index in Server.ids of the identity served; 0: not known (yet)
}

type servedListener struct{ net.Listener }

func (l servedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &servedConn{Conn: c}, nil
}

// recordChoice wraps cfg's GetConfigForClient (tlsconfig's choice among the
// identities) to note the identity chosen on the connection.
func (s *Server) recordChoice(cfg *tls.Config) {
	choose := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := choose(hello)
		if sc, ok := hello.Conn.(*servedConn); ok && err == nil && c != nil && len(c.Certificates) == 1 {
			sc.chosen.Store(int32(s.identityOf(c.Certificates[0]) + 1))
		}
		return c, err
	}
}

// identityOf returns the index of the identity whose current certificate is
// cert, or -1 (it rotated since it was chosen: the connection then counts as
// served by every identity, and the next rotation of any drains it).
func (s *Server) identityOf(cert tls.Certificate) int {
	if len(cert.Certificate) == 0 {
		return -1
	}
	for i, p := range s.ids {
		if m := p.Current(); m.HasIdentity() && bytes.Equal(m.Certificate().Certificate[0], cert.Certificate[0]) {
			return i
		}
	}
	return -1
}

// servedBy limits the identity drain of the policy set of s.ids[i] to the
// connections served that identity (and those whose choice is not known).
func (s *Server) servedBy(i int) drain.Option {
	return drain.WithServedBy(func(c net.Conn) bool {
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		sc, ok := c.(*servedConn)
		if !ok {
			return true
		}
		n := sc.chosen.Load()
		return n == 0 || int(n) == i+1
	})
}
