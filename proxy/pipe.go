package proxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one forwarded connection of ModeTCP, client side and remote side, with
// the moment a byte last moved either way: what "idle" means to a drain.
type conn struct {
	front     net.Conn
	last      atomic.Int64 // unix nanoseconds
	done      chan struct{}
	staleOnce sync.Once

	mu     sync.Mutex
	back   net.Conn
	closed bool
}

func newConn(front net.Conn) *conn {
	c := &conn{front: front, done: make(chan struct{})}
	c.touch()
	return c
}

func (c *conn) touch() { c.last.Store(time.Now().UnixNano()) }

// idleFor reports whether no byte moved for d.
func (c *conn) idleFor(d time.Duration) bool {
	return time.Since(time.Unix(0, c.last.Load())) >= d
}

// setBack records the remote side; it reports false (and closes back) when c
// was closed meanwhile.
func (c *conn) setBack(back net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		back.Close()
		return false
	}
	c.back = back
	return true
}

// close ends both sides at once.
func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.front.Close()
	if c.back != nil {
		c.back.Close()
	}
}

// closeWhenIdle closes c as soon as it moved no byte for idle, and at the latest
// when limit fires (nil: never).
func (c *conn) closeWhenIdle(idle time.Duration, limit <-chan struct{}) {
	c.staleOnce.Do(func() {
		go func() {
			tick := time.NewTicker(max(idle/4, time.Millisecond))
			defer tick.Stop()
			for {
				if c.idleFor(idle) {
					c.close()
					return
				}
				select {
				case <-c.done:
					return
				case <-limit:
					c.close()
					return
				case <-tick.C:
				}
			}
		}()
	})
}

// bufs hold one TLS record (16 KiB, the most a tls.Conn Read returns), and an
// idle connection parks one per direction.
var bufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// pipe copies both ways until both directions ended, passing a half-close on
// (a client that shuts its side still reads the reply), then closes c.
func (c *conn) pipe() {
	defer close(c.done)
	defer c.close()
	c.mu.Lock()
	back := c.back
	c.mu.Unlock()
	up := make(chan struct{})
	go func() { defer close(up); c.copy(back, c.front) }()
	c.copy(c.front, back) // on the connection's own goroutine: one stack fewer
	<-up
}

type closeWriter interface{ CloseWrite() error }

func (c *conn) copy(dst, src net.Conn) {
	b := bufs.Get().(*[]byte)
	defer bufs.Put(b)
	_, err := io.CopyBuffer(dst, activity{src, c}, *b)
	if err == nil {
		if cw, ok := dst.(closeWriter); ok && cw.CloseWrite() == nil {
			return // the other direction goes on
		}
	}
	c.close() // a broken side, or one that cannot half-close, ends both
}

// activity records the moment of every read that moved bytes. It hides src's
// WriterTo, so that every read goes through it.
type activity struct {
	r io.Reader
	c *conn
}

func (a activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.c.touch()
	}
	return n, err
}
