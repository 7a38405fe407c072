package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// h1Direct sends a bodiless HTTP/1.1 request to the backend on the handler's own
// goroutine: it writes the request on an idle keep-alive connection and reads the
// response there, where http.Transport hands each request to a write loop and the
// response back from a read loop (two goroutine hand-offs per request, measured as
// a few microseconds of a small request's latency on loopback). Requests with a
// body, upgrades and everything else go to http.Transport, which handles them
// (concurrent body writes, 100-continue, protocol switches). A connection is
// reused only once its response was read to the end, and never after a response
// that closes it; informational (1xx) responses are skipped, not forwarded.
type h1Direct struct {
	target Target
	idleMu sync.Mutex
	idle   []*h1Conn
	max    int
	closed bool
}

type h1Conn struct {
	c     net.Conn
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // idle since
}

// h1IdleTimeout is how long a connection may stay idle in the pool (as
// http.Transport's IdleConnTimeout in backendTransport).
const h1IdleTimeout = 90 * time.Second

// direct reports whether r can take the direct path.
func (h *h1Direct) direct(r *http.Request) bool {
	return (r.Body == nil || r.Body == http.NoBody) && r.ContentLength == 0 &&
		r.Header.Get("Upgrade") == "" && r.Header.Get("Expect") == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
}

func (h *h1Direct) get() *h1Conn {
	h.idleMu.Lock()
	defer h.idleMu.Unlock()
	for n := len(h.idle); n > 0; n-- {
		c := h.idle[n-1]
		h.idle = h.idle[:n-1]
		if time.Since(c.since) < h1IdleTimeout {
			return c
		}
		c.c.Close()
	}
	return nil
}

func (h *h1Direct) put(c *h1Conn) {
	h.idleMu.Lock()
	if !h.closed && len(h.idle) < h.max {
		c.since = time.Now()
		h.idle = append(h.idle, c)
		c = nil
	}
	h.idleMu.Unlock()
	if c != nil {
		c.c.Close()
	}
}

func (h *h1Direct) closeIdle() {
	h.idleMu.Lock()
	idle := h.idle
	h.idle, h.closed = nil, true
	h.idleMu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

// RoundTrip sends r (a request direct accepted) on an idle connection, once more
// on a new one when a reused connection turns out closed before any response byte.
func (h *h1Direct) RoundTrip(r *http.Request) (*http.Response, error) {
	for {
		c := h.get()
		reused := c != nil
		if c == nil {
			nc, err := h.target.dial(r.Context())
			if err != nil {
				return nil, err
			}
			c = &h1Conn{c: nc, br: bufio.NewReaderSize(nc, 4096), bw: bufio.NewWriterSize(nc, 4096)}
		}
		resp, err := h.send(c, r)
		if err == nil {
			return resp, nil
		}
		c.c.Close()
		if !reused || r.Context().Err() != nil || !errors.Is(err, errStale) {
			return nil, err
		}
	}
}

var errStale = errors.New("proxy: the backend closed an idle connection")

// send writes r on c and reads the response head. The request's context
// aborts the exchange (a past deadline on c) until the response body is closed.
func (h *h1Direct) send(c *h1Conn, r *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(r.Context(), func() { c.c.SetDeadline(time.Unix(1, 0)) })
	resp, err := h.exchange(c, r)
	if err != nil {
		stop()
		return nil, err
	}
	reuse := !resp.Close && !r.Close && resp.StatusCode != http.StatusSwitchingProtocols
	resp.Body = &h1Body{ReadCloser: resp.Body, h: h, c: c, reuse: reuse, stop: stop}
	return resp, nil
}

func (h *h1Direct) exchange(c *h1Conn, r *http.Request) (*http.Response, error) {
	if err := r.Write(c.bw); err != nil {
		return nil, errors.Join(errStale, err)
	}
	if err := c.bw.Flush(); err != nil {
		return nil, errors.Join(errStale, err)
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, errors.Join(errStale, err) // not a byte of a response: safe to send again
	}
	for {
		resp, err := http.ReadResponse(c.br, r)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // informational: the final response follows
		}
		return resp, nil
	}
}

// h1Body returns its connection to the pool once read to the end, and closes it
// when closed before.
type h1Body struct {
	io.ReadCloser
	h     *h1Direct
	c     *h1Conn
	stop  func() bool // the context's abort; false once it fired
	reuse bool
	eof   bool
	done  bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *h1Body) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.ReadCloser.Close()
	if b.stop() && b.eof && b.reuse && err == nil {
		b.h.put(b.c)
	} else {
		b.c.c.Close()
	}
	return err
}
