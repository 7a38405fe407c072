package drain

import (
	"crypto/x509"
	"net"
	"sync"
	"sync/atomic"

	"github.com/hotcert/hotcert"
)

// conn is one accepted connection and the grpc.Server serving it.
type conn struct {
	net.Conn
	closeOnce sync.Once
	onClose   func()        // run once, when the connection is first closed
	drainCh   chan struct{} // closed when draining starts
	closed    atomic.Bool   // Close was called (denied.go)

	mu       sync.Mutex
	identity *hotcert.Material   // material current when the handshake began
	peer     []*x509.Certificate // verified peer chain (leaf first), if any
	draining bool                // a GOAWAY drain or a cut started
	cutDone  bool                // a cut started
}

func newConn(c net.Conn) *conn {
	return &conn{Conn: c, drainCh: make(chan struct{})}
}

func (c *conn) netConn() net.Conn { return c.Conn }

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

// Close closes the connection and tells the Server it is gone (onClose).
func (c *conn) Close() error {
	c.closed.Store(true)
	err := c.Conn.Close()
	c.closeOnce.Do(func() {
		if c.onClose != nil {
			c.onClose()
		}
	})
	return err
}

// cut closes the connection at once, in its GOAWAY drain or not (a peer no
// longer acceptable does not keep the grace of a drain that began before);
// false if it was already cut.
func (c *conn) cut() bool {
	c.mu.Lock()
	already := c.cutDone
	c.cutDone, c.draining = true, true
	c.mu.Unlock()
	if already {
		return false
	}
	c.Close()
	return true
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

// oneConnListener hands its one connection to grpc.Server.Serve and then fails,
// so that Serve returns at once: the connection's transport lives on without it
// (Serve returning stops nothing), and Stop and GracefulStop still reach it.
type oneConnListener struct {
	c     *conn
	taken atomic.Bool
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	if l.taken.Swap(true) {
		return nil, net.ErrClosed // not temporary: Serve returns
	}
	return l.c, nil
}

func (l *oneConnListener) Close() error   { return nil }
func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }
