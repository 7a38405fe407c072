package drain_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/httptls"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/tlsconfig"
)

// denyFiles is a deny list in a mounted-volume-like directory, followed by a
// revocation.Reloader that checks CRLs against ca.
type denyFiles struct {
	w *hotcerttest.AtomicWriter
	r *revocation.Reloader
}

func newDenyFiles(t testing.TB, ca *hotcerttest.CA) *denyFiles {
	t.Helper()
	w := hotcerttest.MustNewAtomicWriter(t.TempDir())
	w.MustWrite(map[string][]byte{"deny.list": []byte("# nothing revoked\n")})
	src, err := revocation.Files(filepath.Join(w.Dir(), "deny.list"), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := revocation.New(context.Background(), src, nil, hotcert.WithSettle(0), hotcert.WithPollInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &denyFiles{w: w, r: r}
}

func (d *denyFiles) revoke(leaf *hotcerttest.Leaf) {
	d.w.MustWrite(map[string][]byte{"deny.list": fmt.Appendf(nil, "serial %s issuer %s\n",
		hotcert.FormatSerial(leaf.Cert.SerialNumber), hotcert.FingerprintOf(leaf.Issuer.Cert))})
}

// newRevocationFixture serves agents of agentCA with a certificate of serverCA,
// refusing at the handshake and cutting live what deny revokes; wrap, if not nil,
// wraps the server's transport credentials; policies, if not nil, gets the
// store (the server's material) and returns more drain options, as newFixture's.
func newRevocationFixture(t *testing.T, serverCA, agentCA *hotcerttest.CA, deny *denyFiles, wrap func(credentials.TransportCredentials) credentials.TransportCredentials,
	policies func(*hotcert.Store) []drain.Option) *fixture {
	t.Helper()
	f := &fixture{store: hotcert.NewStore(material(t, serverCA.MustIssue(), agentCA)), logs: &testutil.LogBuffer{}, hs: &handshakes{}, slowStarted: make(chan struct{}, 1)}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	creds := grpccreds.NewMTLSServer(f.store, tlsconfig.WithDenyList(deny.r))
	if wrap != nil {
		creds = wrap(creds)
	}
	opts := []drain.Option{drain.WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))), drain.WithComponent("agent_grpc"),
		drain.WithRevocationCut(deny.r), drain.WithGrace(time.Minute)}
	if policies != nil {
		opts = append(opts, policies(f.store)...)
	}
	f.srv = drain.NewServer(countingCreds{creds, &f.conns, f.hs},
		func(o ...grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(o...)
			s.RegisterService(&desc, f)
			return s
		}, opts...)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	return f
}

// TestRevocationCutEndsOnlyTheRevokedAgent: of 20 agents holding gRPC streams, the
// one whose serial is added to the deny list loses its connection at once (no
// GOAWAY grace) and cannot reconnect; no other agent's stream is disturbed.
func TestRevocationCutEndsOnlyTheRevokedAgent(t *testing.T) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, agentCA)
	f := newRevocationFixture(t, serverCA, agentCA, deny, nil, nil)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	const n = 20
	agents := make([]*agent, n)
	leaves := make([]*hotcerttest.Leaf, n)
	for i := range agents {
		leaves[i] = agentCA.MustIssue(hotcerttest.WithCommonName(fmt.Sprintf("agent-%d", i)))
		agents[i] = dial(t, f, leaves[i], serverCA)
		a := agents[i]
		wg.Go(func() { a.watch(ctx) })
		<-a.serials
	}
	handshakes := f.conns.Load()

	deny.revoke(leaves[7])
	testutil.WaitFor(t, "the revoked agent's connection to close", func() bool { return f.srv.Conns() == n-1 })
	testutil.WaitFor(t, "the revoked agent's stream to end", func() bool { return agents[7].failures.Load() > 0 })
	// The cut closes the connection, then logs it.
	testutil.WaitFor(t, "the cut to be logged", func() bool { return strings.Contains(f.logs.String(), "peer certificate revoked") })
	logs := f.logs.String()
	if !strings.Contains(logs, "peer certificate revoked") || !strings.Contains(logs, "CN=agent-7") || strings.Count(logs, "peer certificate revoked") != 1 {
		t.Fatalf("want one cut line naming agent-7:\n%s", logs)
	}
	// Its reconnects are refused at the handshake; nobody else reconnected.
	testutil.WaitFor(t, "a refused reconnect", func() bool { return agents[7].failures.Load() >= 2 })
	if got := f.conns.Load(); got != handshakes {
		t.Errorf("%d handshakes succeeded after the revocation, want 0", got-handshakes)
	}
	for i, a := range agents {
		if i == 7 {
			continue
		}
		select {
		case <-a.serials:
			t.Errorf("agent %d re-opened its stream", i)
		default:
		}
		if a.failures.Load() != 0 {
			t.Errorf("agent %d's stream failed", i)
		}
	}
}

// TestRevocationCutEndsADrainingConnection: a connection in its GOAWAY drain
// (the server's certificate changed; an RPC in flight keeps it open for up to
// the minute of grace) whose peer is then revoked closes at once, its RPC
// failing, not at the grace's end.
func TestRevocationCutEndsADrainingConnection(t *testing.T) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, agentCA)
	reg := prometheus.NewRegistry()
	m, err := metrics.NewDrain(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newRevocationFixture(t, serverCA, agentCA, deny, nil, func(s *hotcert.Store) []drain.Option {
		return []drain.Option{drain.WithIdentityDrain(s, 0), drain.WithObserver(m)}
	})
	leaf := agentCA.MustIssue(hotcerttest.WithCommonName("agent-draining"))
	a := dial(t, f, leaf, serverCA)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inflight := make(chan error, 1)
	go func() {
		inflight <- a.cc.Invoke(ctx, "/hotcert.test.Drain/Slow", durationpb.New(time.Minute), new(wrapperspb.StringValue))
	}()
	<-f.slowStarted
	f.store.Set(material(t, serverCA.MustIssue(), agentCA)) // the identity drain: a GOAWAY, a minute of grace
	testutil.WaitFor(t, "the connection's GOAWAY", func() bool { return counterSum(t, reg, "hotcert_tls_connections_drained_total") == 1 })
	if f.srv.Conns() != 1 {
		t.Fatalf("%d connections in the drain's grace, want the one of the RPC in flight", f.srv.Conns())
	}

	deny.revoke(leaf)
	testutil.WaitFor(t, "the draining connection to close", func() bool { return f.srv.Conns() == 0 })
	select {
	case err := <-inflight:
		if err == nil {
			t.Fatal("the RPC in flight on the revoked peer's connection succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the RPC in flight on the revoked peer's connection is still running")
	}
	if logs := f.logs.String(); strings.Count(logs, "peer certificate revoked") != 1 {
		t.Fatalf("want one cut line:\n%s", logs)
	}
}

// serveWithRevocationCut serves srv over TLS on a loopback port with the live cut
// of deny (logging to logs) and returns its URL.
func serveWithRevocationCut(t *testing.T, srv *http.Server, deny *denyFiles, logs *testutil.LogBuffer) string {
	t.Helper()
	d := drain.NewHTTPServer(drain.WithRevocationCut(deny.r), drain.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), drain.WithGrace(time.Minute))
	d.Wrap(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String() + "/"
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { d.Close(); srv.Close() })
	return url
}

// TestHTTPRevocationCutClosesOnlyTheRevokedClient: an HTTP/2 client whose
// certificate is revoked loses its connection and cannot get back in; another
// keeps its connection.
func TestHTTPRevocationCutClosesOnlyTheRevokedClient(t *testing.T) {
	serverCA, clientCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, clientCA)
	store := hotcert.NewStore(material(t, serverCA.MustIssue(), clientCA))
	logs := &testutil.LogBuffer{}
	var closed atomic.Int64
	srv := &http.Server{
		TLSConfig: httptls.MTLSServerConfig(store, tlsconfig.WithDenyList(deny.r)),
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				closed.Add(1)
			}
		},
	}
	url := serveWithRevocationCut(t, srv, deny, logs)

	revoked := clientCA.MustIssue(hotcerttest.WithCommonName("client-revoked"))
	keep := httpClient(t, true, serverCA, clientCA.MustIssue(hotcerttest.WithCommonName("client-kept")))
	cut := httpClient(t, true, serverCA, revoked)
	for _, c := range []*http.Client{keep, cut} {
		if _, _, err := get(t, c, url); err != nil {
			t.Fatal(err)
		}
	}
	deny.revoke(revoked)
	testutil.WaitFor(t, "the revoked client's connection to close", func() bool { return closed.Load() >= 1 })
	testutil.WaitFor(t, "the cut to be logged", func() bool { return strings.Contains(logs.String(), "peer certificate revoked") }) // after the close
	if n := closed.Load(); n != 1 {
		t.Fatalf("%d connections closed, want 1", n)
	}
	if !strings.Contains(logs.String(), "CN=client-revoked") || strings.Contains(logs.String(), "CN=client-kept") {
		t.Fatalf("wrong peer cut:\n%s", logs)
	}
	if _, _, err := get(t, cut, url); err == nil {
		t.Fatal("the revoked client gets back in")
	}
	if _, reused, err := get(t, keep, url); err != nil || !reused {
		t.Fatalf("the other client lost its connection: reused=%v err=%v", reused, err)
	}
}

// A Tracker with WithRevocationCut hands a tracked connection whose peer the new
// list denies to its drain function at once (prompt), leaves the others, and cuts
// a peer the list already denies when SetPeer records it (the list changed
// between the handshake's check and the recording).
func TestTrackerRevocationCut(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	deny := newDenyFiles(t, ca)
	var mu sync.Mutex
	drained := map[net.Conn]bool{} // conn → prompt
	tr := drain.NewTracker(func(c *drain.Tracked, prompt bool) {
		mu.Lock()
		defer mu.Unlock()
		drained[c.Conn()] = prompt
	}, drain.WithRevocationCut(deny.r))
	t.Cleanup(tr.Close)
	seen := func(c net.Conn) (ok, prompt bool) {
		mu.Lock()
		defer mu.Unlock()
		prompt, ok = drained[c]
		return ok, prompt
	}
	conn := func() net.Conn { a, b := net.Pipe(); t.Cleanup(func() { a.Close(); b.Close() }); return a }
	revoked, kept := ca.MustIssue(hotcerttest.WithCommonName("revoked")), ca.MustIssue(hotcerttest.WithCommonName("kept"))
	cRevoked, cKept := conn(), conn()
	tr.Track(cRevoked).SetPeer([]*x509.Certificate{revoked.Cert, ca.Cert})
	tr.Track(cKept).SetPeer([]*x509.Certificate{kept.Cert, ca.Cert})

	deny.revoke(revoked)
	testutil.WaitFor(t, "the revoked peer's cut", func() bool { ok, _ := seen(cRevoked); return ok })
	if _, prompt := seen(cRevoked); !prompt {
		t.Error("a revocation cut was not prompt")
	}
	late := conn()
	tr.Track(late).SetPeer([]*x509.Certificate{revoked.Cert, ca.Cert})
	if ok, prompt := seen(late); !ok || !prompt {
		t.Errorf("a peer the list in use denies, recorded after the change: drained=%v prompt=%v, want a prompt cut from SetPeer", ok, prompt)
	}
	if ok, _ := seen(cKept); ok {
		t.Error("a peer the list does not deny was drained")
	}
}

// TestTrackerRevocationCutEndsADrainingConnection: a tracked connection
// drained gracefully (the server's certificate changed) whose peer is then
// revoked is drained again, promptly; a second revocation calls nothing.
func TestTrackerRevocationCutEndsADrainingConnection(t *testing.T) {
	serverCA, ca := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, ca)
	store := hotcert.NewStore(material(t, serverCA.MustIssue(), ca))
	var mu sync.Mutex
	var calls []bool // prompt, per call
	tr := drain.NewTracker(func(_ *drain.Tracked, prompt bool) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, prompt)
	}, drain.WithIdentityDrain(store, 0), drain.WithRevocationCut(deny.r))
	t.Cleanup(tr.Close)
	got := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	revoked := ca.MustIssue(hotcerttest.WithCommonName("revoked"))
	tr.Track(a).SetPeer([]*x509.Certificate{revoked.Cert, ca.Cert})

	store.Set(material(t, serverCA.MustIssue(), ca))
	testutil.WaitFor(t, "the graceful drain", func() bool { return len(got()) == 1 })
	deny.revoke(revoked)
	testutil.WaitFor(t, "the revocation's cut", func() bool { return len(got()) == 2 })
	if c := got(); c[0] || !c[1] {
		t.Fatalf("drain calls prompt=%v, want a graceful one then a prompt one", c)
	}
	other := ca.MustIssue(hotcerttest.WithCommonName("other"))
	deny.w.MustWrite(map[string][]byte{"deny.list": fmt.Appendf(nil, "serial %s issuer %s\nserial %s issuer %s\n",
		hotcert.FormatSerial(revoked.Cert.SerialNumber), hotcert.FingerprintOf(ca.Cert),
		hotcert.FormatSerial(other.Cert.SerialNumber), hotcert.FingerprintOf(ca.Cert))})
	testutil.WaitFor(t, "the next list", func() bool { return deny.r.Current().Check([]*x509.Certificate{other.Cert, ca.Cert}) != nil })
	if c := got(); len(c) != 2 {
		t.Fatalf("drain calls %v after the next list, want the two before", c)
	}
}

// An HTTP/1 connection whose handshake completed before its certificate was
// revoked, and that has sent no request yet (its peer not yet recorded by any
// request), is cut too.
func TestHTTPRevocationCutClosesAConnectionBeforeItsFirstRequest(t *testing.T) {
	serverCA, clientCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	deny := newDenyFiles(t, clientCA)
	store := hotcert.NewStore(material(t, serverCA.MustIssue(), clientCA))
	srv := &http.Server{
		TLSConfig: httptls.MTLSServerConfig(store, tlsconfig.WithDenyList(deny.r)),
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
	}
	d := drain.NewHTTPServer(drain.WithRevocationCut(deny.r), drain.WithGrace(time.Minute))
	d.Wrap(srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { d.Close(); srv.Close() })

	dial := func(leaf *hotcerttest.Leaf) *tls.Conn {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: hotcerttest.Pool(serverCA),
			Certificates: []tls.Certificate{leaf.TLSCertificate()}, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	revoked := clientCA.MustIssue(hotcerttest.WithCommonName("client-revoked"))
	cut, kept := dial(revoked), dial(clientCA.MustIssue(hotcerttest.WithCommonName("client-kept")))
	// The server sends its session tickets with its first flight after the
	// client's Finished: read nothing, so that only a close ends the read below.
	deny.revoke(revoked)
	cut.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := cut.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the revoked client's idle connection was not closed: %v", err)
	}
	kept.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := kept.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the other client's connection: %v, want it open", err)
	}
}
