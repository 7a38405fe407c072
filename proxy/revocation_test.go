package proxy_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/proxy"
	"github.com/hotcert/hotcert/revocation"
)

// denyFiles are a deny list and a CRL in a directory written the way the kubelet
// updates a mounted ConfigMap, followed by a revocation.Reloader whose CRLs are
// checked against ca's bundle (trust).
type denyFiles struct {
	w  *hotcerttest.AtomicWriter
	r  *revocation.Reloader
	ca *hotcerttest.CA
	n  int64 // CRL number
}

func newDenyFiles(t testing.TB, ca *hotcerttest.CA, trust hotcert.Provider) *denyFiles {
	t.Helper()
	d := &denyFiles{w: hotcerttest.MustNewAtomicWriter(t.TempDir()), ca: ca}
	d.write(t, "")
	src, err := revocation.Files(filepath.Join(d.w.Dir(), "deny.list"), filepath.Join(d.w.Dir(), "ca.crl"))
	if err != nil {
		t.Fatal(err)
	}
	d.r, err = revocation.New(context.Background(), src, trust, hotcert.WithSettle(0), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.r.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// write publishes a list with the given deny-list lines and a CRL revoking crl.
func (d *denyFiles) write(t testing.TB, lines string, crl ...*hotcerttest.Leaf) {
	t.Helper()
	d.n++
	now := time.Now()
	var serials []*big.Int
	for _, l := range crl {
		serials = append(serials, l.Cert.SerialNumber)
	}
	d.w.MustWrite(map[string][]byte{"deny.list": []byte("# revoked\n" + lines),
		"ca.crl": d.ca.MustCRL(d.n, now.Add(-time.Minute), now.Add(time.Hour), serials...)})
}

// revoke publishes a list revoking leaves one way: by serial and issuer, by
// SPKI, or by CRL; it returns when the list is written.
func (d *denyFiles) revoke(t testing.TB, kind string, leaves ...*hotcerttest.Leaf) {
	t.Helper()
	var b strings.Builder
	switch kind {
	case "serial":
		for _, l := range leaves {
			fmt.Fprintf(&b, "serial %s issuer %s\n", hotcert.FormatSerial(l.Cert.SerialNumber), hotcert.FingerprintOf(l.Issuer.Cert))
		}
	case "spki":
		for _, l := range leaves {
			h := sha256.Sum256(l.Cert.RawSubjectPublicKeyInfo)
			fmt.Fprintf(&b, "spki %s\n", hex.EncodeToString(h[:]))
		}
	case "crl":
		d.write(t, "", leaves...)
		return
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	d.write(t, b.String())
}

const cutLine = "closing connection: peer certificate revoked"

// deniedPeers counts the open connections whose peer the list in use denies, and
// all of them, as a status page does with Peers.
func deniedPeers(peers func(func([]*x509.Certificate) bool), l *revocation.List) (denied, all int) {
	for chain := range peers {
		all++
		if l.Check(chain) != nil {
			denied++
		}
	}
	return denied, all
}

// TestServerTCPDenyListCutsTheRevokedClient: of the clients holding connections
// through a tcp-mode proxy, the one whose certificate the deny list adds (by
// serial, by SPKI, by CRL) loses every connection at once — the full handshake's
// and the TLS 1.3 resumption's — and cannot get back in, neither with a full
// handshake nor by resuming a session issued before the revocation; every other
// connection stays up.
func TestServerTCPDenyListCutsTheRevokedClient(t *testing.T) {
	for _, kind := range []string{"serial", "spki", "crl"} {
		t.Run(kind, func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			id := hotcert.NewStore(material(t, ca.MustIssue()))
			trust := hotcert.NewStore(material(t, nil, ca))
			deny := newDenyFiles(t, ca, trust)
			var logs testutil.LogBuffer
			s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id}, proxy.WithTrust(trust), proxy.WithDenyList(deny.r),
				proxy.WithGrace(time.Hour), proxy.WithIdle(time.Hour), proxy.WithLogger(logger(&logs)))
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, s)
			dial := func(cfg *tls.Config) (*tls.Conn, error) {
				c, err := tls.Dial("tcp", addr, cfg)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(10 * time.Second))
				if err := roundTrip(t, c, "open"); err != nil {
					return nil, err
				}
				c.SetDeadline(time.Time{})
				return c, nil
			}
			revoked := ca.MustIssue(hotcerttest.WithCommonName("revoked"))
			cache := tls.NewLRUClientSessionCache(4)
			rcfg := clientConfig(ca, revoked, "localhost")
			rcfg.ClientSessionCache = cache
			full, err := dial(rcfg)
			if err != nil {
				t.Fatal(err)
			}
			resumed, err := dial(rcfg)
			if err != nil || !resumed.ConnectionState().DidResume {
				t.Fatalf("the second connection of the revoked client did not resume (%v): the resumption case is not tested", err)
			}
			var others []*tls.Conn
			for i := range 5 {
				c, err := dial(clientConfig(ca, ca.MustIssue(hotcerttest.WithCommonName(fmt.Sprintf("kept-%d", i))), "localhost"))
				if err != nil {
					t.Fatal(err)
				}
				others = append(others, c)
			}
			if denied, all := deniedPeers(s.Peers, deny.r.Current()); denied != 0 || all != 7 {
				t.Fatalf("Peers before the revocation: %d denied of %d, want 0 of 7", denied, all)
			}

			start := time.Now()
			deny.revoke(t, kind, revoked)
			waitClosed(t, full)
			waitClosed(t, resumed)
			t.Logf("both connections of the revoked client ended %s after the list was written", time.Since(start))
			for i, c := range others {
				if err := roundTrip(t, c, "kept"); err != nil {
					t.Fatalf("connection of kept-%d: %v", i, err)
				}
			}
			testutil.WaitFor(t, "the cut's log lines", func() bool { return logs.Count(cutLine) >= 2 })
			if n := logs.Count(cutLine); n != 2 {
				t.Errorf("%d cut lines, want 2 (one per connection)\n%s", n, logs.String())
			}
			testutil.WaitFor(t, "the cut connections to leave Peers", func() bool {
				_, all := deniedPeers(s.Peers, deny.r.Current())
				return all == 5
			})
			if denied, _ := deniedPeers(s.Peers, deny.r.Current()); denied != 0 {
				t.Errorf("Peers after the cut: %d denied, want 0", denied)
			}

			// The session ticket of before the revocation is offered and refused.
			if _, err := dial(rcfg); err == nil {
				t.Fatal("the revoked client resumed its session")
			}
			testutil.WaitFor(t, "the refused resumption's line", func() bool { return strings.Contains(logs.String(), "resumed session refused") })
			fresh := clientConfig(ca, revoked, "localhost")
			if _, err := dial(fresh); err == nil {
				t.Fatal("the revoked client got back in with a full handshake")
			}
			if _, err := dial(clientConfig(ca, ca.MustIssue(), "localhost")); err != nil {
				t.Fatalf("a client the list does not name is refused: %v", err)
			}
		})
	}
}

// streamBackend serves /stream (writes "start\n", then "end\n" once release is
// closed, or returns when the request ends) and / ("ok").
func streamBackend(t testing.TB, release <-chan struct{}) proxy.Target {
	return httpBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			io.WriteString(w, "ok")
			return
		}
		io.WriteString(w, "start\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
			io.WriteString(w, "end\n")
		case <-r.Context().Done():
		}
	}))
}

// stream is one streaming request in flight: its first line read.
type stream struct {
	body *bufio.Reader
	resp *http.Response
}

func openStream(t testing.TB, c *http.Client, url string, proto int) *stream {
	t.Helper()
	resp, err := c.Get(url + "stream")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.ProtoMajor != proto {
		t.Fatalf("HTTP/%d, want HTTP/%d", resp.ProtoMajor, proto)
	}
	s := &stream{body: bufio.NewReader(resp.Body), resp: resp}
	if line, err := s.body.ReadString('\n'); err != nil || line != "start\n" {
		t.Fatalf("stream start: %q %v", line, err)
	}
	return s
}

// rest reads the stream to its end.
func (s *stream) rest() (string, error) {
	b, err := io.ReadAll(s.body)
	return string(b), err
}

// getReused makes one request and says whether it reused a connection.
func getReused(c *http.Client, url string) (reused bool, err error) {
	var info httptrace.GotConnInfo
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { info = i }}))
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && string(b) != "ok" {
		err = fmt.Errorf("body %q", b)
	}
	return info.Reused, err
}

// TestServerHTTPDenyListCutsTheRevokedClient: in http mode, over HTTP/1.1 and
// HTTP/2, the revoked client's connections end at once — a request in flight on
// it (a stream) included, and an idle keep-alive connection — its new requests are
// refused at the handshake, and every other client keeps its connection and its
// stream, which finishes normally.
func TestServerHTTPDenyListCutsTheRevokedClient(t *testing.T) {
	for _, proto := range []int{1, 2} {
		t.Run(fmt.Sprintf("HTTP/%d", proto), func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			id := hotcert.NewStore(material(t, ca.MustIssue()))
			trust := hotcert.NewStore(material(t, nil, ca))
			deny := newDenyFiles(t, ca, trust)
			release := make(chan struct{})
			var logs testutil.LogBuffer
			s, err := proxy.NewServer(streamBackend(t, release), []hotcert.Provider{id}, proxy.WithMode(proxy.ModeHTTP),
				proxy.WithTrust(trust), proxy.WithDenyList(deny.r), proxy.WithGrace(time.Hour), proxy.WithLogger(logger(&logs)))
			if err != nil {
				t.Fatal(err)
			}
			url := "https://" + serve(t, s) + "/"
			client := func(leaf *hotcerttest.Leaf) *http.Client {
				c := httpsClient(clientConfig(ca, leaf, "localhost"), proto == 2)
				t.Cleanup(c.CloseIdleConnections)
				return c
			}
			revoked := ca.MustIssue(hotcerttest.WithCommonName("revoked"))
			rStream, rIdle := client(revoked), client(revoked)
			cut := openStream(t, rStream, url, proto)
			if _, err := getReused(rIdle, url); err != nil {
				t.Fatal(err)
			}
			var kept []*http.Client
			var keptStreams []*stream
			for i := range 4 {
				c := client(ca.MustIssue(hotcerttest.WithCommonName(fmt.Sprintf("kept-%d", i))))
				if _, err := getReused(c, url); err != nil {
					t.Fatal(err)
				}
				kept = append(kept, c)
				if proto == 2 { // HTTP/1 would open a second connection for the stream
					keptStreams = append(keptStreams, openStream(t, c, url, proto))
				}
			}

			start := time.Now()
			deny.revoke(t, "serial", revoked)
			ended := make(chan error, 1)
			go func() { _, err := cut.rest(); ended <- err }()
			select {
			case err := <-ended:
				if err == nil {
					t.Fatal("the revoked client's stream went on to its end")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the revoked client's stream is still open 30 s after the revocation")
			}
			t.Logf("the revoked client's stream ended %s after the list was written", time.Since(start))
			testutil.WaitFor(t, "the cut's log lines", func() bool { return logs.Count(cutLine) >= 2 })
			if n := logs.Count(cutLine); n != 2 {
				t.Errorf("%d cut lines, want 2 (the stream's connection and the idle one)\n%s", n, logs.String())
			}
			if _, err := getReused(rIdle, url); err == nil {
				t.Fatal("the revoked client's next request was served")
			}
			for i, c := range kept {
				if reused, err := getReused(c, url); err != nil || !reused {
					t.Fatalf("kept-%d: reused=%v err=%v, want its connection kept", i, reused, err)
				}
			}
			close(release)
			for i, st := range keptStreams {
				if rest, err := st.rest(); err != nil || rest != "end\n" {
					t.Fatalf("kept-%d's stream: %q %v, want it finished", i, rest, err)
				}
			}
		})
	}
}

// remoteHTTPS serves "ok" over TLS with leaf on a loopback port and counts its
// closed connections.
func remoteHTTPS(t testing.TB, leaf *hotcerttest.Leaf) (addr string, closed func() int) {
	t.Helper()
	var n atomic.Int64
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}},
		ErrorLog:  log.New(io.Discard, "", 0), // the refused handshakes
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				n.Add(1)
			}
		},
	}
	ln := listen(t)
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), func() int { return int(n.Load()) }
}

// TestClientDenyListCutsTheRevokedRemote: a proxy client (tcp and http mode)
// whose deny list adds a remote's server certificate closes its connections to
// that remote at once, refuses to connect to it again, and keeps its connections
// to another remote.
func TestClientDenyListCutsTheRevokedRemote(t *testing.T) {
	serverOnly := hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageServerAuth)
	for _, mode := range []proxy.Mode{proxy.ModeTCP, proxy.ModeHTTP} {
		t.Run(string(mode), func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			id := hotcert.NewStore(material(t, ca.MustIssue()))
			trust := hotcert.NewStore(material(t, nil, ca))
			deny := newDenyFiles(t, ca, trust)
			var logs testutil.LogBuffer
			newClient := func(remote string) (*proxy.Client, string) {
				c, err := proxy.NewClient(remote, id, proxy.WithMode(mode), proxy.WithTrust(trust), proxy.WithDenyList(deny.r),
					proxy.WithServerName("localhost"), proxy.WithGrace(time.Hour), proxy.WithIdle(time.Hour), proxy.WithLogger(logger(&logs)))
				if err != nil {
					t.Fatal(err)
				}
				return c, serve(t, c)
			}
			revoked, kept := ca.MustIssue(serverOnly, hotcerttest.WithCommonName("revoked-remote")), ca.MustIssue(serverOnly, hotcerttest.WithCommonName("kept-remote"))
			if mode == proxy.ModeTCP {
				cRevoked, toRevoked := newClient(tlsEchoRemote(t, revoked))
				_, toKept := newClient(tlsEchoRemote(t, kept))
				dial := func(addr string) (net.Conn, error) {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
					c.SetDeadline(time.Now().Add(10 * time.Second))
					return c, roundTrip(t, c, "open")
				}
				a, err := dial(toRevoked)
				if err != nil {
					t.Fatal(err)
				}
				b, err := dial(toKept)
				if err != nil {
					t.Fatal(err)
				}
				if denied, all := deniedPeers(cRevoked.Peers, deny.r.Current()); denied != 0 || all != 1 {
					t.Fatalf("Peers: %d denied of %d, want 0 of 1", denied, all)
				}
				start := time.Now()
				deny.revoke(t, "serial", revoked)
				waitClosed(t, a)
				t.Logf("the connection to the revoked remote ended %s after the list was written", time.Since(start))
				if err := roundTrip(t, b, "kept"); err != nil {
					t.Fatalf("the connection to the other remote: %v", err)
				}
				if _, err := dial(toRevoked); err == nil {
					t.Fatal("connected to the revoked remote again")
				}
			} else {
				rAddr, rClosed := remoteHTTPS(t, revoked)
				kAddr, kClosed := remoteHTTPS(t, kept)
				_, toRevoked := newClient(rAddr)
				_, toKept := newClient(kAddr)
				local := &http.Client{Transport: &http.Transport{}}
				t.Cleanup(local.CloseIdleConnections)
				for _, a := range []string{toRevoked, toKept} {
					if _, err := getReused(local, "http://"+a+"/"); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				deny.revoke(t, "crl", revoked)
				testutil.WaitFor(t, "the connection to the revoked remote to close", func() bool { return rClosed() == 1 })
				t.Logf("the connection to the revoked remote ended %s after the list was written", time.Since(start))
				resp, err := local.Get("http://" + toRevoked + "/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("a request to the revoked remote: %s, want 502 (its handshake refused)", resp.Status)
				}
				if _, err := getReused(local, "http://"+toKept+"/"); err != nil || kClosed() != 0 {
					t.Fatalf("the other remote: err=%v, %d of its connections closed", err, kClosed())
				}
			}
			testutil.WaitFor(t, "the cut's log line", func() bool { return logs.Count(cutLine) >= 1 })
			if n := logs.Count(cutLine); n != 1 {
				t.Errorf("%d cut lines, want 1\n%s", n, logs.String())
			}
		})
	}
}

// A Server refuses a deny list without client certificates to check it against.
func TestServerDenyListNeedsClientCertificates(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	deny := newDenyFiles(t, ca, hotcert.NewStore(material(t, nil, ca)))
	if _, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id}, proxy.WithDenyList(deny.r)); err == nil ||
		!strings.Contains(err.Error(), "WithTrust") {
		t.Fatalf("NewServer: %v, want an error naming WithTrust", err)
	}
}

// TestRevocationCutBound measures, in tcp and h2 mode, the time from the write of
// a deny list (a kubelet-style symlink swap) to the end of the revoked client's
// connection, revoking 10 of 50 connected clients one after the other; the 40
// others stay connected throughout.
func TestRevocationCutBound(t *testing.T) {
	for _, mode := range []string{"tcp", "h2"} {
		t.Run(mode, func(t *testing.T) {
			ca := hotcerttest.MustNewCA()
			id := hotcert.NewStore(material(t, ca.MustIssue()))
			trust := hotcert.NewStore(material(t, nil, ca))
			deny := newDenyFiles(t, ca, trust)
			release := make(chan struct{})
			opts := []proxy.Option{proxy.WithTrust(trust), proxy.WithDenyList(deny.r), proxy.WithGrace(time.Hour), proxy.WithIdle(time.Hour)}
			backend := echoBackend(t, nil)
			if mode == "h2" {
				opts, backend = append(opts, proxy.WithMode(proxy.ModeHTTP)), streamBackend(t, release)
			}
			s, err := proxy.NewServer(backend, []hotcert.Provider{id}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, s)
			const n, revokes = 200, 20
			leaves := make([]*hotcerttest.Leaf, n)
			ended := make([]func() error, n) // blocks until the client's connection ends
			for i := range leaves {
				leaves[i] = ca.MustIssue(hotcerttest.WithCommonName(fmt.Sprintf("client-%d", i)))
				if mode == "tcp" {
					c, err := tls.Dial("tcp", addr, clientConfig(ca, leaves[i], "localhost"))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
					if err := roundTrip(t, c, "open"); err != nil {
						t.Fatal(err)
					}
					ended[i] = func() error { _, err := c.Read(make([]byte, 1)); return err }
				} else {
					hc := httpsClient(clientConfig(ca, leaves[i], "localhost"), true)
					t.Cleanup(hc.CloseIdleConnections)
					st := openStream(t, hc, "https://"+addr+"/", 2)
					ended[i] = func() error { _, err := st.rest(); return err }
				}
			}
			var took []time.Duration
			for i := range revokes {
				done := make(chan error, 1)
				go func() { done <- ended[i]() }()
				start := time.Now()
				deny.revoke(t, "serial", leaves[:i+1]...)
				select {
				case err := <-done:
					if err == nil && mode == "h2" {
						t.Fatalf("client-%d's stream ended normally", i)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("client-%d's connection still open 30 s after its revocation", i)
				}
				took = append(took, time.Since(start))
			}
			// Below n-revokes, this waits in vain and fails.
			testutil.WaitFor(t, "the proxy to count the revoked connections closed", func() bool { return s.Conns() == n-revokes })
			close(release)
			slices.Sort(took)
			t.Logf("%s: write of the list → the revoked connection ended, %d revocations among %d connections: min %s, median %s, max %s",
				mode, revokes, n, took[0], took[len(took)/2], took[len(took)-1])
		})
	}
}

// TestServerStaleCRLPolicy: once the CRL of one of two client CAs passes its
// NextUpdate (a fake clock moved past it), refuse-all ends the connections of that
// CA's clients and refuses them again, and keeps the other CA's; keep-enforcing
// keeps both.
func TestServerStaleCRLPolicy(t *testing.T) {
	for _, policy := range []revocation.StalePolicy{revocation.KeepEnforcing, revocation.RefuseAll} {
		t.Run(policy.String(), func(t *testing.T) {
			clock := hotcerttest.NewFakeClock(time.Now())
			caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
			id := hotcert.NewStore(material(t, caA.MustIssue()))
			trust := hotcert.NewStore(material(t, nil, caA, caB))
			w := hotcerttest.MustNewAtomicWriter(t.TempDir())
			w.MustWrite(map[string][]byte{"ca.crl": caA.MustCRL(1, clock.Now().Add(-time.Minute), clock.Now().Add(time.Hour))})
			src, err := revocation.Files("", filepath.Join(w.Dir(), "ca.crl"))
			if err != nil {
				t.Fatal(err)
			}
			deny, err := revocation.New(context.Background(), src, trust, revocation.WithClock(clock), revocation.WithStalePolicy(policy),
				hotcert.WithSettle(0), hotcert.WithPollInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = deny.Start(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id}, proxy.WithTrust(trust), proxy.WithDenyList(deny),
				proxy.WithGrace(time.Hour), proxy.WithIdle(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			addr := serve(t, s)
			dial := func(leaf *hotcerttest.Leaf) (*tls.Conn, error) {
				c, err := tls.Dial("tcp", addr, clientConfig(caA, leaf, "localhost"))
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(10 * time.Second))
				return c, roundTrip(t, c, "open")
			}
			leafA, leafB := caA.MustIssue(), caB.MustIssue()
			a, err := dial(leafA)
			if err != nil {
				t.Fatal(err)
			}
			b, err := dial(leafB)
			if err != nil {
				t.Fatal(err)
			}

			testutil.WaitFor(t, "the staleness timer", func() bool { return clock.Waiting() > 0 })
			clock.Advance(2 * time.Hour)
			testutil.WaitFor(t, "the stale CRL reported", func() bool { return len(deny.Current().Info().Stale) == 1 })
			if policy == revocation.RefuseAll {
				waitClosed(t, a)
				if _, err := dial(caA.MustIssue()); err == nil {
					t.Error("refuse-all let a client of the stale CRL's issuer in")
				}
			} else {
				// The stale report came before any cut would: a connection still
				// open now stays (keep-enforcing republishes nothing).
				if err := roundTrip(t, a, "kept"); err != nil {
					t.Errorf("keep-enforcing cut a client of the stale CRL's issuer: %v", err)
				}
			}
			if err := roundTrip(t, b, "kept"); err != nil {
				t.Errorf("a client of the other CA was cut: %v", err)
			}
		})
	}
}

// TestServerHTTPDenyListEndsTheRevokedGRPCStream: gRPC through an http-mode
// proxy; the revoked client's server-streaming call (a health Watch) ends with an
// error, its next call is refused, and another client's Watch goes on receiving.
func TestServerHTTPDenyListEndsTheRevokedGRPCStream(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, ca))
	deny := newDenyFiles(t, ca, trust)
	ln := listen(t)
	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	s, err := proxy.NewServer(proxy.Target{Network: "tcp", Address: ln.Addr().String()}, []hotcert.Provider{id},
		proxy.WithMode(proxy.ModeHTTP), proxy.WithTrust(trust), proxy.WithDenyList(deny.r), proxy.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	watch := func(leaf *hotcerttest.Leaf) (healthpb.HealthClient, healthpb.Health_WatchClient) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(clientConfig(ca, leaf, "localhost"))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		hc := healthpb.NewHealthClient(cc)
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Watch: %v, %v", r, err)
		}
		return hc, w
	}
	revoked := ca.MustIssue(hotcerttest.WithCommonName("revoked"))
	rc, rw := watch(revoked)
	_, kw := watch(ca.MustIssue(hotcerttest.WithCommonName("kept")))

	deny.revoke(t, "serial", revoked)
	// Unavailable: the connection closed under the stream (the test's deadline
	// would say DeadlineExceeded).
	if r, err := rw.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("the revoked client's stream after the revocation: %v, %v; want Unavailable", r, err)
	}
	if _, err := rc.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("the revoked client's next call got through")
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if r, err := kw.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("the other client's stream: %v, %v", r, err)
	}
}
