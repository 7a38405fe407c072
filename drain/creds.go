package drain

import (
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
)

// trackingCreds wraps the server's transport credentials to remember, per
// connection, which material was current when its handshake began and which peer
// chain it verified.
type trackingCreds struct {
	credentials.TransportCredentials
	s *Server
}

func (t *trackingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, _ := raw.(*conn)
	if c != nil && t.s.cfg.identity != nil {
		c.mu.Lock()
		c.identity = t.s.cfg.identity.Current()
		c.mu.Unlock()
	}
	out, info, err := t.TransportCredentials.ServerHandshake(raw)
	if err != nil || c == nil {
		return out, info, err
	}
	if ti, ok := info.(credentials.TLSInfo); ok {
		chain := hotcert.PeerChain(ti.State)
		c.mu.Lock()
		c.peer = chain
		c.mu.Unlock()
		t.s.expiry.schedule(c, chain)
	}
	return out, info, nil
}

func (t *trackingCreds) Clone() credentials.TransportCredentials {
	return &trackingCreds{TransportCredentials: t.TransportCredentials.Clone(), s: t.s}
}
