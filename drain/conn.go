package drain

import (
	"crypto/x509"
	"net"
	"sync"

	"github.com/hotcert/hotcert"
)

// conn is one accepted connection and the grpc.Server serving it.
type conn struct {
	net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	drainCh   chan struct{} // closed when draining starts

	mu       sync.Mutex
	identity *hotcert.Material   // material current when the handshake began
	peer     []*x509.Certificate // verified peer chain (leaf first), if any
	draining bool
}

func newConn(c net.Conn) *conn {
	return &conn{Conn: c, closed: make(chan struct{}), drainCh: make(chan struct{})}
}

func (c *conn) servedIdentity() *hotcert.Material {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.identity
}

func (c *conn) peerChain() []*x509.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peer
}

// startDrain tells the connection's RPCs (see Draining) to wind down.
func (c *conn) startDrain() { close(c.drainCh) }

// Close closes the connection and tells the Server it is gone.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { close(c.closed) })
	return err
}

// markDraining returns false if the connection was already being drained.
func (c *conn) markDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return false
	}
	c.draining = true
	return true
}

// oneConnListener hands its one connection to grpc.Server.Serve, then blocks until
// it or the connection is closed, which is how Serve learns it should return (the
// connection's transport lives on until the connection closes: Serve returning does
// not stop it).
type oneConnListener struct {
	c      *conn
	ch     chan net.Conn
	closed chan struct{}
	close  sync.Once
}

func newOneConnListener(c *conn) *oneConnListener {
	l := &oneConnListener{c: c, ch: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.ch <- c
	return l
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-l.c.closed:
		return nil, net.ErrClosed
	}
}

func (l *oneConnListener) Close() error {
	l.close.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
