package proxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/proxy"
)

// rawBackend accepts connections and runs serve on each; it counts them.
func rawBackend(t *testing.T, serve func(c net.Conn)) (proxy.Target, *atomic.Int64) {
	t.Helper()
	ln := listen(t)
	var n atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return proxy.Target{Network: "tcp", Address: ln.Addr().String()}, &n
}

func httpProxy(t *testing.T, backend proxy.Target) (*http.Client, string) {
	t.Helper()
	ca := hotcerttest.MustNewCA()
	s, err := proxy.NewServer(backend, []hotcert.Provider{hotcert.NewStore(material(t, ca.MustIssue()))}, proxy.WithMode(proxy.ModeHTTP))
	if err != nil {
		t.Fatal(err)
	}
	c := httpsClient(clientConfig(ca, nil, "localhost"), false)
	t.Cleanup(c.CloseIdleConnections)
	return c, "https://" + serve(t, s)
}

func get(t *testing.T, c *http.Client, method, url string) string {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %q %v", method, url, resp.Status, b, err)
	}
	return string(b)
}

// Bodiless requests reuse one backend connection once each response was read to
// the end, HEAD included; a request with a body goes the same way.
func TestServerHTTPReusesBackendConnections(t *testing.T) {
	var conns atomic.Int64
	backend := httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Length", fmt.Sprint(len("ok")+len(b)))
		io.WriteString(w, "ok"+string(b))
	}))
	// Count the backend's connections through a counting forwarder.
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				b, err := net.Dial("tcp", backend.Address)
				if err != nil {
					return
				}
				defer b.Close()
				go io.Copy(b, c)
				io.Copy(c, b)
			}()
		}
	}()
	client, url := httpProxy(t, proxy.Target{Network: "tcp", Address: ln.Addr().String()})
	for i := range 20 {
		method := map[bool]string{false: http.MethodGet, true: http.MethodHead}[i%5 == 4]
		want := map[bool]string{false: "ok", true: ""}[method == http.MethodHead]
		if got := get(t, client, method, url+"/"); got != want {
			t.Fatalf("%s: %q, want %q", method, got, want)
		}
	}
	resp, err := client.Post(url+"/", "text/plain", strings.NewReader("+body"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "ok+body" {
		t.Fatalf("POST: %q", b)
	}
	if n := conns.Load(); n > 2 {
		t.Fatalf("%d backend connections for 21 sequential requests, want them reused", n)
	}
}

// A backend that closes every connection after its response without saying so
// (the connection looks reusable): the next request finds its pooled connection
// closed before any response byte, and is sent again on a new one. No request
// fails.
func TestServerHTTPRetriesOnAStaleBackendConnection(t *testing.T) {
	backend, conns := rawBackend(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		// and close, as an idle timeout would
	})
	client, url := httpProxy(t, backend)
	for range 10 {
		if got := get(t, client, http.MethodGet, url+"/"); got != "ok" {
			t.Fatalf("got %q", got)
		}
	}
	if n := conns.Load(); n != 10 {
		t.Fatalf("%d backend connections, want 10 (one per request)", n)
	}
}

// A client that gives up ends the backend exchange: the proxy closes its
// backend connection instead of waiting for a response that does not come.
func TestServerHTTPClientCancelClosesTheBackendExchange(t *testing.T) {
	closed := make(chan struct{})
	backend, _ := rawBackend(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		c.Read(make([]byte, 1)) // no response; returns when the proxy closes
		close(closed)
	})
	client, url := httpProxy(t, backend)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
	if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("request: %v, want the client's deadline", err)
	}
	testutil.WaitFor(t, "the proxy to close the backend connection", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
}
