package drain_test

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/tlsconfig"
)

// A connection that resumed a session (TLS 1.3 or 1.2 ticket) is authenticated by
// the certificate of the handshake that issued the ticket: crypto/tls restores that peer chain
// (PeerCertificates, VerifiedChains) from the ticket, and it is what the live cut
// matches on. These tests resume for real (DidResume is checked on both ends),
// revoke the certificate by serial — which matches only with the issuer of the
// restored verified chain — and check that the resumed connection is cut and that
// offering a ticket again is refused as a resumption.

// handshakeLog records the outcome of every server handshake.
type handshakeLog struct {
	mu     sync.Mutex
	states []tls.ConnectionState
	errs   []string
}

func (l *handshakeLog) add(cs *tls.ConnectionState, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.errs = append(l.errs, err.Error())
		return
	}
	l.states = append(l.states, *cs)
}

// last is the state of the latest successful handshake.
func (l *handshakeLog) last(t *testing.T) tls.ConnectionState {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.states) == 0 {
		t.Fatal("no handshake recorded")
	}
	return l.states[len(l.states)-1]
}

// refusedResumptions counts the handshakes refused as a resumption.
func (l *handshakeLog) refusedResumptions() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		if strings.Contains(e, "resumed session refused") {
			n++
		}
	}
	return n
}

// loggedCreds records, in log, the TLS state of each handshake it completes
// (ServerHandshake or ClientHandshake) or its error.
type loggedCreds struct {
	credentials.TransportCredentials
	log *handshakeLog
}

func (c loggedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	c.record(info, err)
	return conn, info, err
}

func (c loggedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	c.record(info, err)
	return conn, info, err
}

func (c loggedCreds) record(info credentials.AuthInfo, err error) {
	if err != nil {
		c.log.add(nil, err)
		return
	}
	ti := info.(credentials.TLSInfo)
	c.log.add(&ti.State, nil)
}

func (c loggedCreds) Clone() credentials.TransportCredentials {
	return loggedCreds{c.TransportCredentials.Clone(), c.log}
}

// resumingClientConfig presents leaf, trusts ca and keeps session tickets, with
// TLS version v only.
func resumingClientConfig(ca *hotcerttest.CA, leaf *hotcerttest.Leaf, v uint16) *tls.Config {
	return &tls.Config{RootCAs: hotcerttest.Pool(ca), Certificates: []tls.Certificate{leaf.TLSCertificate()},
		ServerName: "localhost", MinVersion: v, MaxVersion: v, ClientSessionCache: tls.NewLRUClientSessionCache(8)}
}

// resumedVersions are the TLS versions whose resumed connections the cut is tested on.
var resumedVersions = []struct {
	name string
	v    uint16
}{{"TLS1.3", tls.VersionTLS13}, {"TLS1.2", tls.VersionTLS12}}

func TestRevocationCutEndsAResumedGRPCConnection(t *testing.T) {
	for _, v := range resumedVersions {
		t.Run(v.name, func(t *testing.T) { testResumedGRPCCut(t, v.v) })
	}
}

func testResumedGRPCCut(t *testing.T, version uint16) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, agentCA)
	var server handshakeLog
	f := newRevocationFixture(t, serverCA, agentCA, deny, func(c credentials.TransportCredentials) credentials.TransportCredentials {
		return loggedCreds{c, &server}
	}, nil)
	revoked := agentCA.MustIssue(hotcerttest.WithCommonName("agent-revoked"))
	var client handshakeLog
	creds := loggedCreds{credentials.NewTLS(resumingClientConfig(serverCA, revoked, version)), &client}
	newAgent := func() *agent {
		cc, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return &agent{cc: cc, serials: make(chan string, 100)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	watch := func(a *agent) {
		wctx, stop := context.WithCancel(ctx)
		wg.Go(func() { a.watch(wctx) })
		<-a.serials
		t.Cleanup(stop)
	}

	// A full handshake issues the session ticket; a second connection resumes it.
	first := newAgent()
	watch(first)
	if client.last(t).DidResume {
		t.Fatal("the first connection resumed")
	}
	first.cc.Close()
	testutil.WaitFor(t, "the first connection to close", func() bool { return f.srv.Conns() == 0 })
	resumed := newAgent()
	watch(resumed)
	if cs := client.last(t); !cs.DidResume {
		t.Fatal("the second connection did not resume its session: the test would prove nothing")
	}
	cs := server.last(t)
	if !cs.DidResume || len(cs.PeerCertificates) == 0 || !cs.PeerCertificates[0].Equal(revoked.Cert) {
		t.Fatalf("server side of the second connection: resumed=%v, %d peer certificates, want the resumed session of agent-revoked", cs.DidResume, len(cs.PeerCertificates))
	}
	kept := dial(t, f, agentCA.MustIssue(hotcerttest.WithCommonName("agent-kept")), serverCA)
	watch(kept)
	testutil.WaitFor(t, "two connections", func() bool { return f.srv.Conns() == 2 })

	shakes := f.conns.Load()
	deny.revoke(revoked)
	// The cut closes the connection, then logs it.
	testutil.WaitFor(t, "the resumed connection to be cut", func() bool {
		return resumed.failures.Load() > 0 && strings.Contains(f.logs.String(), "peer certificate revoked")
	})
	if logs := f.logs.String(); strings.Count(logs, "peer certificate revoked") != 1 || !strings.Contains(logs, "CN=agent-revoked") {
		t.Fatalf("want one cut line naming agent-revoked:\n%s", logs)
	}
	// The agent reconnects with the ticket it holds: refused as a resumption.
	testutil.WaitFor(t, "a refused resumption", func() bool { return server.refusedResumptions() > 0 })
	if n := f.conns.Load() - shakes; n != 0 {
		t.Fatalf("%d handshakes succeeded after the revocation, want 0", n)
	}
	if kept.failures.Load() != 0 {
		t.Error("the other agent's stream failed")
	}
	select {
	case <-kept.serials:
		t.Error("the other agent re-opened its stream")
	default:
	}
}

func TestHTTPRevocationCutEndsAResumedConnection(t *testing.T) {
	for _, v := range resumedVersions {
		for _, h2 := range []bool{true, false} {
			name := "HTTP/1.1"
			if h2 {
				name = "HTTP/2"
			}
			t.Run(v.name+"/"+name, func(t *testing.T) { testResumedHTTPCut(t, v.v, h2) })
		}
	}
}

func testResumedHTTPCut(t *testing.T, version uint16, h2 bool) {
	serverCA, clientCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, clientCA)
	store := hotcert.NewStore(material(t, serverCA.MustIssue(), clientCA))
	logs, errs := &testutil.LogBuffer{}, &testutil.LogBuffer{}
	var open atomic.Int64
	var mu sync.Mutex
	var seen []tls.ConnectionState // the server's view of each request's connection
	srv := &http.Server{
		TLSConfig: httptls.MTLSServerConfig(store, tlsconfig.WithDenyList(deny.r)),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, *r.TLS)
			mu.Unlock()
			_, _ = w.Write([]byte("ok"))
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed:
				open.Add(-1)
			}
		},
		ErrorLog: log.New(errs, "", 0), // handshake errors
	}
	url := serveWithRevocationCut(t, srv, deny, logs)

	revoked := clientCA.MustIssue(hotcerttest.WithCommonName("client-revoked"))
	cut := httpClient(t, h2, serverCA, revoked)
	tr := cut.Transport.(*http.Transport)
	tr.TLSClientConfig = resumingClientConfig(serverCA, revoked, version)
	keep := httpClient(t, h2, serverCA, clientCA.MustIssue(hotcerttest.WithCommonName("client-kept")))

	cs, _, err := getTLS(cut, url)
	if err != nil || cs.DidResume {
		t.Fatalf("first request: %v (resumed=%v)", err, cs != nil && cs.DidResume)
	}
	tr.CloseIdleConnections()
	testutil.WaitFor(t, "the first connection to close", func() bool { return open.Load() == 0 })
	cs, reused, err := getTLS(cut, url)
	if err != nil || reused || !cs.DidResume {
		t.Fatalf("second request: %v (reused=%v, resumed=%v), want a new connection that resumed", err, reused, cs != nil && cs.DidResume)
	}
	mu.Lock()
	last := seen[len(seen)-1]
	mu.Unlock()
	if !last.DidResume || len(last.PeerCertificates) == 0 || !last.PeerCertificates[0].Equal(revoked.Cert) {
		t.Fatalf("server side of the second connection: resumed=%v, %d peer certificates, want the resumed session of client-revoked", last.DidResume, len(last.PeerCertificates))
	}
	if _, _, err := getTLS(keep, url); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "two open connections", func() bool { return open.Load() == 2 })

	deny.revoke(revoked)
	testutil.WaitFor(t, "the resumed connection to be cut", func() bool {
		return open.Load() == 1 && strings.Contains(logs.String(), "peer certificate revoked") // closed, then logged
	})
	if l := logs.String(); strings.Count(l, "peer certificate revoked") != 1 || !strings.Contains(l, "CN=client-revoked") {
		t.Fatalf("want one cut line naming client-revoked:\n%s", l)
	}
	// A new connection offers the ticket again: refused as a resumption.
	tr.CloseIdleConnections()
	if _, _, err := getTLS(cut, url); err == nil {
		t.Fatal("the revoked client gets back in")
	}
	testutil.WaitFor(t, "the refused resumption to be logged", func() bool {
		return strings.Contains(errs.String(), "resumed session refused")
	})
	if _, reused, err := getTLS(keep, url); err != nil || !reused {
		t.Fatalf("the other client lost its connection: reused=%v err=%v", reused, err)
	}
}
