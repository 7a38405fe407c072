package drain_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/metrics"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

// A test service without generated code, served by a *fixture: a unary Slow that
// says it started (fixture.slowStarted) and waits for the given duration (or its
// connection's end), and a server stream Watch that sends once and then holds
// until the connection drains.
var desc = grpc.ServiceDesc{
	ServiceName: "hotcert.test.Drain",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Slow", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		d := new(durationpb.Duration)
		if err := dec(d); err != nil {
			return nil, err
		}
		select {
		case srv.(*fixture).slowStarted <- struct{}{}:
		default: // one is already buffered
		}
		select {
		case <-time.After(d.AsDuration()):
			return wrapperspb.String("ok"), nil
		case <-ctx.Done(): // its connection closed
			return nil, ctx.Err()
		}
	}}},
	Streams: []grpc.StreamDesc{{StreamName: "Watch", ServerStreams: true, Handler: func(_ any, stream grpc.ServerStream) error {
		if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			return err
		}
		if err := stream.SendMsg(wrapperspb.String("hello")); err != nil {
			return err
		}
		select {
		case <-drain.Draining(stream.Context()): // end cleanly: the client re-opens elsewhere
			return nil
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}}},
}

type fixture struct {
	ca    *hotcerttest.CA
	store *hotcert.Store
	srv   *drain.Server
	addr  string
	logs  *testutil.LogBuffer
	conns atomic.Int64 // accepted handshakes
	hs    *handshakes
	// slowStarted receives when a Slow RPC is running on the server (once
	// buffered: a test that waits for one call sees it).
	slowStarted chan struct{}
}

// handshakes records when server handshakes completed.
type handshakes struct {
	mu sync.Mutex
	at []time.Time
}

func (h *handshakes) add() {
	h.mu.Lock()
	h.at = append(h.at, time.Now())
	h.mu.Unlock()
}

// since returns the handshakes completed after t, as offsets from t.
func (h *handshakes) since(t time.Time) []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []time.Duration
	for _, a := range h.at {
		if a.After(t) {
			out = append(out, a.Sub(t))
		}
	}
	return out
}

func material(t testing.TB, l *hotcerttest.Leaf, bundle ...*hotcerttest.CA) *hotcert.Material {
	t.Helper()
	c := hotcert.Content{Cert: hotcert.Input{Name: "c", Data: l.ChainPEM}, Key: hotcert.Input{Name: "k", Data: l.KeyPEM},
		CA: hotcert.Input{Name: "ca", Data: hotcerttest.BundlePEM(bundle...)}}
	m, err := hotcert.Validate(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// newFixture serves m; policies gets the store (the server's material) and returns
// the drain options to use.
func newFixture(t testing.TB, m *hotcert.Material, policies func(*hotcert.Store) []drain.Option) *fixture {
	t.Helper()
	f := &fixture{store: hotcert.NewStore(m), logs: &testutil.LogBuffer{}, hs: &handshakes{}, slowStarted: make(chan struct{}, 1)}
	opts := policies(f.store)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	opts = append([]drain.Option{drain.WithLogger(slog.New(slog.NewTextHandler(f.logs, nil))), drain.WithComponent("agent_grpc")}, opts...)
	f.srv = drain.NewServer(countingCreds{grpccreds.NewMTLSServer(f.store), &f.conns, f.hs}, func(o ...grpc.ServerOption) *grpc.Server {
		s := grpc.NewServer(o...)
		s.RegisterService(&desc, f)
		return s
	}, opts...)
	go f.srv.Serve(lis)
	t.Cleanup(f.srv.Stop)
	return f
}

// countingCreds counts completed server handshakes.
type countingCreds struct {
	credentials.TransportCredentials
	n  *atomic.Int64
	hs *handshakes
}

func (c countingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err == nil {
		c.n.Add(1)
		c.hs.add()
	}
	return conn, info, err
}

func (c countingCreds) Clone() credentials.TransportCredentials {
	return countingCreds{c.TransportCredentials.Clone(), c.n, c.hs}
}

// agent is a client with one ClientConn holding a Watch stream, re-opened whenever
// it ends, like a reference agent.
type agent struct {
	cc       *grpc.ClientConn
	serials  chan string // serial of the server certificate each stream ran on
	failures atomic.Int64
}

func dial(t testing.TB, f *fixture, leaf *hotcerttest.Leaf, roots *hotcerttest.CA) *agent {
	t.Helper()
	m := material(t, leaf, roots)
	cc, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(grpccreds.NewClient(hotcert.NewStore(m))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &agent{cc: cc, serials: make(chan string, 100)}
}

// watch keeps a Watch stream open until ctx ends, reporting each stream's server serial.
func (a *agent) watch(ctx context.Context) {
	for ctx.Err() == nil {
		s, err := a.cc.NewStream(ctx, &desc.Streams[0], "/hotcert.test.Drain/Watch")
		if err == nil {
			err = s.SendMsg(wrapperspb.String("hi"))
		}
		if err == nil {
			err = s.RecvMsg(new(wrapperspb.StringValue))
		}
		if err == nil {
			p, _ := peer.FromContext(s.Context())
			ti := p.AuthInfo.(credentials.TLSInfo)
			a.serials <- ti.State.PeerCertificates[0].SerialNumber.String()
			err = s.RecvMsg(new(wrapperspb.StringValue)) // blocks until the server ends the stream
		}
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, io.EOF) {
			a.failures.Add(1) // a drain must end streams cleanly, never with an error
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestIdentityChangeMovesEveryStreamOntoTheNewCertificate(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	first, second := ca.MustIssue(), ca.MustIssue()
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewDrain(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, material(t, first, ca), func(s *hotcert.Store) []drain.Option {
		return []drain.Option{drain.WithIdentityDrain(s, 300*time.Millisecond), drain.WithGrace(5 * time.Second), drain.WithObserver(m)}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	agents := make([]*agent, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range agents {
		agents[i] = dial(t, f, ca.MustIssue(), ca)
		wg.Go(func() { agents[i].watch(ctx) })
	}
	for _, a := range agents {
		if got := <-a.serials; got != first.Cert.SerialNumber.String() {
			t.Fatalf("first stream on %s", got)
		}
	}
	// Unary RPCs keep flowing during the drain: none may fail.
	var rpcFailures atomic.Int64
	stopRPCs := make(chan struct{})
	var rpcs sync.WaitGroup
	for _, a := range agents[:5] {
		rpcs.Go(func() {
			for {
				select {
				case <-stopRPCs:
					return
				default:
				}
				if err := a.cc.Invoke(ctx, "/hotcert.test.Drain/Slow", durationpb.New(5*time.Millisecond), new(wrapperspb.StringValue)); err != nil {
					rpcFailures.Add(1)
				}
			}
		})
	}

	f.store.Set(material(t, second, ca)) // the rotation
	for _, a := range agents {
		select {
		case got := <-a.serials:
			if got != second.Cert.SerialNumber.String() {
				t.Fatalf("re-opened stream on %s, want the new certificate", got)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("an agent was not moved onto the new certificate")
		}
	}
	close(stopRPCs)
	rpcs.Wait()
	for i, a := range agents {
		if a.failures.Load() != 0 {
			t.Errorf("agent %d: %d streams ended with an error", i, a.failures.Load())
		}
	}
	if rpcFailures.Load() != 0 {
		t.Errorf("%d unary RPCs failed during the drain", rpcFailures.Load())
	}
	if got := counterSum(t, reg, "hotcert_tls_connections_drained_total"); got != n {
		t.Errorf("connections drained = %v, want %d", got, n)
	}
	if !strings.Contains(f.logs.String(), "draining connections onto the new certificate") {
		t.Errorf("no drain log line:\n%s", f.logs)
	}
}

func TestTrustChangeCutsOnlyPeersNoLongerTrusted(t *testing.T) {
	serverCA, caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	leaf := serverCA.MustIssue()
	// A product's own names: one prefix and label name for every series, and the
	// label's name as the component key of the log lines.
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewDrain(reg, metrics.WithPrefix("dexaflow"), metrics.WithComponentLabel("listener"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, material(t, leaf, caA, caB), func(s *hotcert.Store) []drain.Option {
		return []drain.Option{drain.WithTrustCut(s), drain.WithGrace(10 * time.Second), drain.WithObserver(m), drain.WithComponentLabel("listener")}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keep := dial(t, f, caB.MustIssue(hotcerttest.WithCommonName("agent-b")), serverCA)
	cut := dial(t, f, caA.MustIssue(hotcerttest.WithCommonName("agent-a")), serverCA)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, a := range []*agent{keep, cut} {
		wg.Go(func() { a.watch(ctx) })
		<-a.serials
	}
	// An in-flight RPC on the connection about to be cut must finish.
	inflight := make(chan error, 1)
	go func() {
		inflight <- cut.cc.Invoke(ctx, "/hotcert.test.Drain/Slow", durationpb.New(500*time.Millisecond), new(wrapperspb.StringValue))
	}()
	select { // the RPC runs on the server before the rotation
	case <-f.slowStarted:
	case err := <-inflight:
		t.Fatalf("the RPC ended before it was seen running: %v", err)
	}

	f.store.Set(material(t, leaf, caB)) // caA removed from the client-CA bundle
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight RPC on the cut connection failed: %v", err)
	}
	testutil.WaitFor(t, "the untrusted peer to be cut", func() bool {
		return strings.Contains(f.logs.String(), "peer certificate no longer trusted")
	})
	logs := f.logs.String()
	if !strings.Contains(logs, "CN=agent-a") || strings.Contains(logs, "CN=agent-b") {
		t.Fatalf("wrong peer cut:\n%s", logs)
	}
	if !strings.Contains(logs, "listener=agent_grpc") || strings.Contains(logs, "component=") {
		t.Errorf("the cut line does not name the component with the metrics' label name:\n%s", logs)
	}
	if err := promtest.GatherAndCompare(reg, strings.NewReader(`
# HELP dexaflow_tls_connections_cut_total Connections closed because their peer certificate is no longer acceptable: it no longer verifies against the client-CA bundle, or it is revoked.
# TYPE dexaflow_tls_connections_cut_total counter
dexaflow_tls_connections_cut_total{listener="agent_grpc"} 1
`), "dexaflow_tls_connections_cut_total"); err != nil {
		t.Error(err)
	}
	// The cut agent cannot come back: its CA is gone.
	testutil.WaitFor(t, "the cut agent's stream to end", func() bool { return f.srv.Conns() == 1 })
	select {
	case s := <-keep.serials:
		t.Fatalf("the trusted agent was disconnected (re-opened on %s)", s)
	default:
	}
	if keep.failures.Load() != 0 {
		t.Fatal("the trusted agent's stream failed")
	}
}

func TestStopClosesEverything(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	f := newFixture(t, material(t, ca.MustIssue(), ca), func(*hotcert.Store) []drain.Option { return nil })
	a := dial(t, f, ca.MustIssue(), ca)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.watch(ctx); close(done) }()
	<-a.serials
	f.srv.GracefulStop()
	if f.srv.Conns() != 0 {
		t.Fatalf("%d connections after GracefulStop", f.srv.Conns())
	}
	cancel()
	<-done
}

// counterSum adds up every series of the named counter.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
