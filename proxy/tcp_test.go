package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
	"github.com/pires/go-proxyproto/tlvparse"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/proxy"
)

// A TCP-mode server terminates mTLS, forwards to the plaintext backend, and lets
// in only the peers its allow list names (by SPIFFE ID here); a refused peer's
// handshake fails, with one warning naming it.
func TestServerTCPAuthorizesBySPIFFEID(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, ca))
	var logs testutil.LogBuffer
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id},
		proxy.WithTrust(trust), proxy.WithAllow(proxy.Allow{SPIFFEIDs: []string{"spiffe://example.org/web"}}),
		proxy.WithLogger(logger(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)

	good := ca.MustIssue(hotcerttest.WithURIs("spiffe://example.org/web"))
	c, err := tls.Dial("tcp", addr, clientConfig(ca, good, "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(t, c, "hello"); err != nil {
		t.Fatal(err)
	}

	bad := ca.MustIssue(hotcerttest.WithURIs("spiffe://example.org/other"))
	c2, err := tls.Dial("tcp", addr, clientConfig(ca, bad, "localhost"))
	if err == nil {
		// TLS 1.3: the client's Finished is sent before the server judges it.
		err = roundTrip(t, c2, "hello")
		c2.Close()
	}
	if err == nil {
		t.Fatal("a peer outside the allow list got through")
	}
	testutil.WaitFor(t, "the refusal's log line", func() bool { return strings.Contains(logs.String(), "peer not allowed") })

	none, err := tls.Dial("tcp", addr, clientConfig(ca, nil, "localhost"))
	if err == nil {
		err = roundTrip(t, none, "hello")
		none.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate got through")
	}
}

// With the PROXY protocol, the backend learns the client's address and verified
// identity: the SSL TLV (verified, CN, the leaf's DER), the SNI and the ALPN.
func TestServerTCPProxyProtocolCarriesThePeer(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, ca))
	accepted := make(chan net.Conn, 1)
	s, err := proxy.NewServer(echoBackend(t, accepted), []hotcert.Provider{id},
		proxy.WithTrust(trust), proxy.WithProxyProtocol(), proxy.WithNextProtos("h2"))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	leaf := ca.MustIssue(hotcerttest.WithCommonName("client-a"), hotcerttest.WithURIs("spiffe://example.org/a"))
	cfg := clientConfig(ca, leaf, "localhost")
	cfg.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "x"); err != nil {
		t.Fatal(err)
	}
	back := <-accepted
	defer back.Close()
	br := bufio.NewReader(back)
	h, err := proxyproto.Read(br)
	if err != nil {
		t.Fatal(err)
	}
	src, _, ok := h.TCPAddrs()
	if !ok || src.String() != c.LocalAddr().String() {
		t.Errorf("PROXY source %v, want the client's %v", src, c.LocalAddr())
	}
	tlvs, err := h.TLVs()
	if err != nil {
		t.Fatal(err)
	}
	var ssl tlvparse.PP2SSL
	var authority, alpn string
	for _, tlv := range tlvs {
		switch tlv.Type {
		case proxyproto.PP2_TYPE_SSL:
			if ssl, err = tlvparse.SSL(tlv); err != nil {
				t.Fatal(err)
			}
		case proxyproto.PP2_TYPE_AUTHORITY:
			authority = string(tlv.Value)
		case proxyproto.PP2_TYPE_ALPN:
			alpn = string(tlv.Value)
		}
	}
	cn, _ := ssl.ClientCN()
	der, _ := ssl.ClientCert()
	if !ssl.Verified() || !ssl.ClientCertConn() || cn != "client-a" || string(der) != string(leaf.Cert.Raw) {
		t.Errorf("SSL TLV: verified %v, cert on conn %v, CN %q, DER matches %v", ssl.Verified(), ssl.ClientCertConn(), cn, string(der) == string(leaf.Cert.Raw))
	}
	if authority != "localhost" || alpn != "h2" {
		t.Errorf("authority %q, ALPN %q; want localhost, h2", authority, alpn)
	}
	if b, err := br.ReadByte(); err != nil || b != 'x' {
		t.Errorf("after the header: %q, %v; want the client's byte", b, err)
	}
}

// After a rotation of the server certificate, a TCP-mode server closes the
// connections opened under the previous one once they are idle, never a busy one
// while it moves bytes; the grace period bounds the wait. A connection opened
// after the rotation stays.
func TestServerTCPDrainClosesIdleConnectionsFirst(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	// idle is long against the busy connection's tick so that a loaded
	// machine's scheduling delay does not make it idle.
	idle := 400 * time.Millisecond
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id},
		proxy.WithDrainWindow(0), proxy.WithIdle(idle), proxy.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", addr, clientConfig(ca, nil, "localhost"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := roundTrip(t, c, "open"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	quiet, busy := dial(), dial()

	// busy echoes a byte at a tenth of the idle time until told to stop.
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		tick := time.NewTicker(idle / 10)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				stopped <- nil
				return
			case <-tick.C:
				if err := roundTrip(t, busy, "b"); err != nil {
					stopped <- err
					return
				}
			}
		}
	}()
	id.Set(material(t, ca.MustIssue()))
	waitClosed(t, quiet)
	fresh := dial()
	// The busy connection lives on for ten idle times at least.
	for range 10 {
		time.Sleep(idle)
		select {
		case err := <-stopped:
			t.Fatalf("the busy connection was cut while it moved bytes: %v", err)
		default:
		}
	}
	close(stop)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	waitClosed(t, busy)
	if err := roundTrip(t, fresh, "still"); err != nil {
		t.Fatalf("a connection opened under the new certificate was drained: %v", err)
	}
}

// A connection whose client certificate no longer verifies after the client-CA
// bundle changes is cut at once, busy or not, with the drain package's warning.
func TestServerTCPCutsUntrustedPeers(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, newCA.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, oldCA, newCA))
	var logs testutil.LogBuffer
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id},
		proxy.WithTrust(trust), proxy.WithGrace(time.Hour), proxy.WithIdle(time.Hour), proxy.WithLogger(logger(&logs)))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	dial := func(leaf *hotcerttest.Leaf) *tls.Conn {
		c, err := tls.Dial("tcp", addr, clientConfig(newCA, leaf, "localhost"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := roundTrip(t, c, "open"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	oldPeer, newPeer := dial(oldCA.MustIssue()), dial(newCA.MustIssue())
	trust.Set(material(t, nil, newCA))
	waitClosed(t, oldPeer)
	if err := roundTrip(t, newPeer, "kept"); err != nil {
		t.Fatalf("a peer the new bundle trusts was cut: %v", err)
	}
	// The line follows the close: wait for it, then count.
	testutil.WaitFor(t, "the cut's log line", func() bool { return logs.Count("closing connection: peer certificate no longer trusted") > 0 })
	if n := logs.Count("closing connection: peer certificate no longer trusted"); n != 1 {
		t.Errorf("%d cut log lines, want 1\n%s", n, logs.String())
	}
}

// Several identities: the SNI picks the certificate, an IP address gets the first.
func TestServerServesIdentitiesBySNI(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a := hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithDNSNames("a.example"))))
	b := hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithDNSNames("b.example"))))
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{a, b})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	served := func(name string) string {
		cfg := clientConfig(ca, nil, name)
		cfg.InsecureSkipVerify = name == "" // an IP: only the choice is looked at
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].DNSNames[0]
	}
	if got := served("b.example"); got != "b.example" {
		t.Errorf("SNI b.example served %s", got)
	}
	if got := served("a.example"); got != "a.example" {
		t.Errorf("SNI a.example served %s", got)
	}
	if got := served(""); got != "a.example" {
		t.Errorf("no SNI served %s, want the first identity", got)
	}
}

// A TCP-mode client accepts plaintext and originates mTLS: the remote sees its
// certificate, and a remote whose identity the allow list does not name is refused.
func TestClientTCPOriginatesMTLS(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	remoteLeaf := ca.MustIssue(hotcerttest.WithDNSNames("remote.example"), hotcerttest.WithURIs("spiffe://example.org/remote"))
	rln := listen(t)
	peers := make(chan string, 4)
	go func() {
		for {
			c, err := rln.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{remoteLeaf.TLSCertificate()},
				ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: hotcerttest.Pool(ca)})
			go func() {
				defer tc.Close()
				if tc.Handshake() != nil {
					return
				}
				peers <- tc.ConnectionState().PeerCertificates[0].URIs[0].String()
				io.Copy(tc, tc)
			}()
		}
	}()
	id := hotcert.NewStore(material(t, ca.MustIssue(hotcerttest.WithURIs("spiffe://example.org/app")), ca))
	c, err := proxy.NewClient(rln.Addr().String(), id, proxy.WithServerName("remote.example"),
		proxy.WithAllow(proxy.Allow{SPIFFEIDs: []string{"spiffe://example.org/remote"}}))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, c)
	pc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := roundTrip(t, pc, "through"); err != nil {
		t.Fatal(err)
	}
	if got := <-peers; got != "spiffe://example.org/app" {
		t.Errorf("the remote saw %s", got)
	}

	refusing, err := proxy.NewClient(rln.Addr().String(), id, proxy.WithServerName("remote.example"),
		proxy.WithAllow(proxy.Allow{SPIFFEIDs: []string{"spiffe://example.org/someone-else"}}))
	if err != nil {
		t.Fatal(err)
	}
	pc2, err := net.Dial("tcp", serve(t, refusing))
	if err != nil {
		t.Fatal(err)
	}
	defer pc2.Close()
	if err := roundTrip(t, pc2, "x"); err == nil {
		t.Fatal("the client reached a remote its allow list does not name")
	}
}

// Shutdown ends idle connections at once and busy ones once idle; Serve returns
// ErrServerClosed.
func TestServerTCPShutdownDrains(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id}, proxy.WithIdle(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	testutil.WaitFor(t, "serving", s.Serving)
	c, err := tls.Dial("tcp", ln.Addr().String(), clientConfig(ca, nil, "localhost"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(t, c, "x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; !errors.Is(err, proxy.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	waitClosed(t, c)
}

// With a maximum connection age, a TCP connection is closed once it is that old
// and idle, without any rotation; a busy one lives on until it goes quiet.
func TestServerTCPMaxConnectionAgeClosesOnceIdle(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, ca.MustIssue()))
	// idle is long against the busy connection's pace (see above).
	idle := 400 * time.Millisecond
	s, err := proxy.NewServer(echoBackend(t, nil), []hotcert.Provider{id},
		proxy.WithMaxConnectionAge(2*idle), proxy.WithIdle(idle), proxy.WithGrace(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s)
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", addr, clientConfig(ca, nil, "localhost"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := roundTrip(t, c, "open"); err != nil {
			t.Fatal(err)
		}
		return c
	}
	quiet, busy := dial(), dial()
	// busy moves a byte every tenth of the idle time for five idle times
	// (two and a half maximum ages).
	result := make(chan error, 1)
	go func() {
		start := time.Now()
		for i := range 50 {
			if err := roundTrip(t, busy, "b"); err != nil {
				result <- fmt.Errorf("the busy connection was cut at its maximum age (round trip %d, after %s): %w", i, time.Since(start), err)
				return
			}
			time.Sleep(idle / 10)
		}
		result <- nil
	}()
	waitClosed(t, quiet)
	if err := <-result; err != nil {
		t.Fatal(err)
	}
	waitClosed(t, busy)
}

// tlsEchoRemote serves a TLS echo with leaf on a loopback port (no client
// certificate asked) and returns its address.
func tlsEchoRemote(t testing.TB, leaf *hotcerttest.Leaf) string {
	t.Helper()
	ln := tls.NewListener(listen(t), &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// The client side cuts, when its bundle changes, the connections to a remote the
// new bundle no longer trusts, and keeps the others.
func TestClientTCPCutsUntrustedRemotes(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	id := hotcert.NewStore(material(t, newCA.MustIssue()))
	trust := hotcert.NewStore(material(t, nil, oldCA, newCA))
	var logs testutil.LogBuffer
	open := func(remote string) net.Conn {
		c, err := proxy.NewClient(remote, id, proxy.WithTrust(trust), proxy.WithServerName("localhost"),
			proxy.WithGrace(time.Hour), proxy.WithIdle(time.Hour), proxy.WithLogger(logger(&logs)))
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.Dial("tcp", serve(t, c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		if err := roundTrip(t, pc, "open"); err != nil {
			t.Fatal(err)
		}
		return pc
	}
	// Server certificates only (serverAuth): they are re-verified as servers.
	serverOnly := hotcerttest.WithExtKeyUsages(x509.ExtKeyUsageServerAuth)
	toOld, toNew := open(tlsEchoRemote(t, oldCA.MustIssue(serverOnly))), open(tlsEchoRemote(t, newCA.MustIssue(serverOnly)))
	trust.Set(material(t, nil, newCA))
	waitClosed(t, toOld)
	if err := roundTrip(t, toNew, "kept"); err != nil {
		t.Fatalf("a connection to a remote the new bundle trusts was cut: %v", err)
	}
	// The line follows the close: wait for it, then count.
	testutil.WaitFor(t, "the cut's log line", func() bool { return logs.Count("closing connection: peer certificate no longer trusted") > 0 })
	if n := logs.Count("closing connection: peer certificate no longer trusted"); n != 1 {
		t.Errorf("%d cut log lines, want 1\n%s", n, logs.String())
	}
}
