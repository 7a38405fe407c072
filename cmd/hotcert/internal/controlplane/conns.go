package controlplane

import (
	"errors"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// connTracker remembers the raw connections a listener accepted, so that
// DropConnections can cut them all, as a replica restart or a network blip does.
type connTracker struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

type trackedListener struct {
	net.Listener
	t *connTracker
}

type trackedConn struct {
	net.Conn
	t    *connTracker
	once sync.Once
}

func (t *connTracker) wrap(ln net.Listener) net.Listener { return &trackedListener{Listener: ln, t: t} }

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: l.t}
	l.t.mu.Lock()
	if l.t.conns == nil {
		l.t.conns = make(map[*trackedConn]struct{})
	}
	l.t.conns[tc] = struct{}{}
	l.t.mu.Unlock()
	return tc, nil
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.t.mu.Lock()
		delete(c.t.conns, c)
		c.t.mu.Unlock()
	})
	return c.Conn.Close()
}

// closeAll closes every open connection and returns how many there were.
func (t *connTracker) closeAll() int {
	t.mu.Lock()
	all := make([]*trackedConn, 0, len(t.conns))
	for c := range t.conns {
		all = append(all, c)
	}
	t.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
	return len(all)
}

// countingCreds counts the outcome of every server-side TLS handshake.
type countingCreds struct {
	credentials.TransportCredentials
	s *Server
}

func (c *countingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		// A connection this server closed itself (shutdown, DropConnections) while
		// its handshake ran is not a failed handshake.
		if !errors.Is(err, net.ErrClosed) {
			c.s.handshakeFailed(raw.RemoteAddr(), agentrpc.HandshakeReason(err), err)
		}
		return nil, nil, err
	}
	c.s.handshakes.Add(1)
	return c.s.peers.track(conn, info), info, nil
}

func (c *countingCreds) Clone() credentials.TransportCredentials {
	return &countingCreds{TransportCredentials: c.TransportCredentials.Clone(), s: c.s}
}
