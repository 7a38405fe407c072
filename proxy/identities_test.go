package proxy_test

import (
	"crypto/tls"
	"fmt"
	"io"
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

// twoIdentities returns the stores of a.example and b.example, one CA's.
func twoIdentities(t *testing.T) (ca *hotcerttest.CA, a, b *hotcert.Store) {
	ca = hotcerttest.MustNewCA()
	a = hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithDNSNames("a.example"))))
	b = hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithDNSNames("b.example"))))
	return ca, a, b
}

// With two identities chosen by SNI, a rotation of one drains only the
// connections that were served it: over HTTP/1.1 they are closed (idle) and over
// HTTP/2 they get a GOAWAY with their next response, so their clients handshake
// again, while the other identity's connections keep serving without a new
// handshake.
func TestServerHTTPDrainsOnlyTheRotatedIdentity(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			ca, a, b := twoIdentities(t)
			var logs testutil.LogBuffer
			backend := httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
			s, err := proxy.NewServer(backend, []hotcert.Provider{a, b}, proxy.WithMode(proxy.ModeHTTP),
				proxy.WithDrainWindow(0), proxy.WithLogger(logger(&logs)))
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, s)
			client := func(name string) (get func() *http.Response, handshakes *atomic.Int64) {
				handshakes = new(atomic.Int64)
				cfg := clientConfig(ca, nil, name)
				cfg.VerifyConnection = func(cs tls.ConnectionState) error {
					if got := cs.PeerCertificates[0].DNSNames[0]; got != name {
						return fmt.Errorf("SNI %s served %s", name, got)
					}
					handshakes.Add(1)
					return nil
				}
				c := httpsClient(cfg, h2)
				t.Cleanup(c.CloseIdleConnections)
				return func() *http.Response {
					t.Helper()
					resp, err := c.Get("https://" + addr + "/")
					if err != nil {
						t.Fatalf("SNI %s: %v", name, err)
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil || string(body) != "ok" {
						t.Fatalf("SNI %s: response %q, %v", name, body, err)
					}
					if want := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != want {
						t.Fatalf("SNI %s: HTTP/%d, want HTTP/%d", name, resp.ProtoMajor, want)
					}
					return resp
				}, handshakes
			}
			getA, hsA := client("a.example")
			getB, hsB := client("b.example")
			getA()
			getB()

			a.Set(material(t, ca.MustIssue(hotcerttest.WithDNSNames("a.example"))))
			// a.example's connection ends (HTTP/1: closed while idle; HTTP/2: a
			// GOAWAY with the next response), and its client handshakes again.
			testutil.WaitFor(t, "a.example's client to reconnect", func() bool { getA(); return hsA.Load() == 2 })
			// b.example's connection was not asked to end: no Connection: close,
			// no GOAWAY, no close, so every request stays on it.
			for range 3 {
				if resp := getB(); resp.Close {
					t.Fatal("b.example's connection got Connection: close for a.example's rotation")
				}
			}
			if n := hsB.Load(); n != 1 {
				t.Fatalf("b.example's client handshook %d times, want 1: its connection was drained for a.example's rotation", n)
			}
			if want := "connections=1 "; !containsLine(logs.String(), "draining connections onto the new certificate", want) {
				t.Fatalf("drain log line does not say %q:\n%s", want, logs.String())
			}
		})
	}
}

// The same in tcp mode: a.example's idle connection is closed, b.example's
// connection keeps forwarding.
func TestServerTCPDrainsOnlyTheRotatedIdentity(t *testing.T) {
	ca, a, b := twoIdentities(t)
	var logs testutil.LogBuffer
	idle := 50 * time.Millisecond
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{a, b},
		proxy.WithDrainWindow(0), proxy.WithIdle(idle), proxy.WithGrace(time.Hour), proxy.WithLogger(logger(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	dial := func(name string) *tls.Conn {
		c, err := tls.Dial("tcp", addr, clientConfig(ca, nil, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if got := c.ConnectionState().PeerCertificates[0].DNSNames[0]; got != name {
			t.Fatalf("SNI %s served %s", name, got)
		}
		if err := roundTrip(t, c, "open"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	connA, connB := dial("a.example"), dial("b.example")
	a.Set(material(t, ca.MustIssue(hotcerttest.WithDNSNames("a.example"))))
	waitClosed(t, connA)
	// b.example's connection has been as idle as a.example's was: a drain would
	// have closed it by now, and would within another idle time.
	for range 3 {
		if err := roundTrip(t, connB, "kept"); err != nil {
			t.Fatalf("b.example's connection was drained for a.example's rotation: %v", err)
		}
		time.Sleep(2 * idle)
	}
	if want := "connections=1 "; !containsLine(logs.String(), "draining connections onto the new certificate", want) {
		t.Fatalf("drain log line does not say %q:\n%s", want, logs.String())
	}
}

// containsLine reports whether a line of logs holds both msg and attr.
func containsLine(logs, msg, attr string) bool {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, msg) && strings.Contains(l, attr) {
			return true
		}
	}
	return false
}
