package controlplane_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// The system under test: control plane replicas whose tls.crt/tls.key live in
// kubelet-style volumes, and agents sharing a kubelet-style ca.crt volume, over
// real loopback gRPC. Intervals are short; every wait is a bounded poll.

const (
	settle = 100 * time.Millisecond // server settle window (absorbs in-place writers)
	// agentConnectTimeout bounds a test agent's connection attempt: one that fails
	// sooner did not wait for it.
	agentConnectTimeout = 10 * time.Second
	poll                = 100 * time.Millisecond // server poll interval: failures must not be re-counted per poll
)

type replica struct {
	name string
	srv  *controlplane.Server
	addr string
	dir  *hotcerttest.AtomicWriter
	reg  *prometheus.Registry
	logs *testutil.LogBuffer
}

func (r *replica) certPath() string { return filepath.Join(r.dir.Dir(), "tls.crt") }
func (r *replica) keyPath() string  { return filepath.Join(r.dir.Dir(), "tls.key") }

// write projects a key pair into the replica's volume, as the kubelet does.
func (r *replica) write(t *testing.T, crt, key []byte) {
	t.Helper()
	if _, err := r.dir.Write(map[string][]byte{"tls.crt": crt, "tls.key": key}); err != nil {
		t.Fatal(err)
	}
}

// serve writes leaf and waits until the replica's next handshake serves it.
func (r *replica) serve(t *testing.T, leaf *hotcerttest.Leaf) {
	t.Helper()
	r.write(t, leaf.ChainPEM, leaf.KeyPEM)
	want := hotcert.FingerprintOf(leaf.Cert)
	testutil.WaitFor(t, r.name+" to serve the new certificate", func() bool {
		return r.srv.Certificate().Current().LeafFingerprint() == want
	})
}

func (r *replica) failures(t *testing.T) float64 {
	return metricValue(t, r.reg, "hotcert_tls_reload_failures_total", map[string]string{"component": "agent_grpc"})
}

func startReplica(t *testing.T, name string, leaf *hotcerttest.Leaf, mutate ...func(*controlplane.Config)) *replica {
	t.Helper()
	r := &replica{
		name: name,
		dir:  hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), name)),
		reg:  prometheus.NewRegistry(),
		logs: &testutil.LogBuffer{},
	}
	r.write(t, leaf.ChainPEM, leaf.KeyPEM)
	src, err := file.New(file.WithKeyPair(r.certPath(), r.keyPath()), file.WithRewatchInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg := controlplane.Config{
		TLS:             src,
		Replica:         name,
		Logger:          slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:      r.reg,
		ReloaderOptions: []hotcert.Option{hotcert.WithSettle(settle), hotcert.WithPollInterval(poll)},
		ShutdownGrace:   2 * time.Second,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	r.srv, err = controlplane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Serve: %v", name, err)
		}
	})
	return r
}

type testAgent struct {
	*agent.Agent
	replica *replica
	reg     *prometheus.Registry
	logs    *testutil.LogBuffer
}

func (a *testAgent) caFailures(t *testing.T) float64 {
	return metricValue(t, a.reg, "hotcert_tls_reload_failures_total", map[string]string{"component": agent.ComponentCA})
}

// caVolume is the agents' ca.crt volume (a ConfigMap such as a trust-manager Bundle
// target).
type caVolume struct{ *hotcerttest.AtomicWriter }

func newCAVolume(t *testing.T, cas ...*hotcerttest.CA) *caVolume {
	v := &caVolume{hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-ca"))}
	v.set(t, hotcerttest.BundlePEM(cas...))
	return v
}

func (v *caVolume) path() string { return filepath.Join(v.Dir(), "ca.crt") }

func (v *caVolume) set(t *testing.T, bundle []byte) {
	t.Helper()
	if _, err := v.Write(map[string][]byte{"ca.crt": bundle}); err != nil {
		t.Fatal(err)
	}
}

// withClientCA has the replica require client certificates that verify against
// the bundle of v (mTLS), read by a file source with opts.
func withClientCA(t *testing.T, v *caVolume, opts ...file.Option) func(*controlplane.Config) {
	return func(c *controlplane.Config) {
		src, err := file.New(append([]file.Option{file.WithCA(v.path())}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		c.ClientCA = src
	}
}

// identity is an agent's tls.crt and tls.key volume (a cert-manager Secret).
type identity struct{ *hotcerttest.AtomicWriter }

func newIdentity(t *testing.T, leaf *hotcerttest.Leaf) *identity {
	id := &identity{hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-tls"))}
	id.set(leaf)
	return id
}

// set writes leaf as the agent's client certificate.
func (id *identity) set(leaf *hotcerttest.Leaf) {
	id.MustWrite(map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM})
}

// use has the agent present the volume's certificate.
func (id *identity) use(c *agent.Config) {
	c.CertFile, c.KeyFile = filepath.Join(id.Dir(), "tls.crt"), filepath.Join(id.Dir(), "tls.key")
}

// startAgents starts n agents spread over the replicas. Half of them dial the
// replica's IP address without a server name (no SNI: the certificate must carry
// the IP SAN), half give the DNS name "localhost" (SNI sent).
func startAgents(t *testing.T, n int, replicas []*replica, ca *caVolume, mutate ...func(*agent.Config)) []*testAgent {
	t.Helper()
	agents := make([]*testAgent, 0, n)
	for i := range n {
		cfg := agent.Config{ID: fmt.Sprintf("agent-%02d", i), CAFile: ca.path()}
		if i%2 == 0 {
			cfg.ServerName = "localhost"
		}
		agents = append(agents, startAgent(t, replicas[i%len(replicas)], cfg, mutate...))
	}
	waitConnected(t, agents)
	return agents
}

// startAgent runs one agent of cfg on r, with the tests' logger, registry and
// timings, then mutate applied.
func startAgent(t *testing.T, r *replica, cfg agent.Config, mutate ...func(*agent.Config)) *testAgent {
	t.Helper()
	ta := &testAgent{replica: r, reg: prometheus.NewRegistry(), logs: &testutil.LogBuffer{}}
	cfg.Server = r.addr
	cfg.Logger, cfg.Registerer = slog.New(slog.NewTextHandler(ta.logs, nil)), ta.reg
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.HeartbeatTimeout, cfg.ConnectTimeout = 10*time.Second, agentConnectTimeout // -race on a busy machine: no spurious drops
	cfg.MinBackoff, cfg.MaxBackoff, cfg.ReconnectJitter = 20*time.Millisecond, 200*time.Millisecond, 20*time.Millisecond
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ta.Agent = a
	runAgent(t, a)
	return ta
}

// runAgent runs a until the test ends.
func runAgent(t *testing.T, a *agent.Agent) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		if err := a.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", a.ID(), err)
		}
	})
}

func waitConnected(t *testing.T, agents []*testAgent) {
	t.Helper()
	testutil.WaitFor(t, "every agent to be connected", func() bool {
		for _, a := range agents {
			if !a.Stats().Connected {
				return false
			}
		}
		return true
	})
}

// reconnectAll cuts every connection of every replica (as a restart or a network
// blip would) and waits until each agent has opened a new stream: a new TLS
// handshake that re-read the CA bundle.
func reconnectAll(t *testing.T, replicas []*replica, agents []*testAgent) {
	t.Helper()
	before := make([]uint64, len(agents))
	for i, a := range agents {
		before[i] = a.Stats().Connects
	}
	for _, r := range replicas {
		r.srv.DropConnections()
	}
	testutil.WaitFor(t, "every agent to reconnect", func() bool {
		for i, a := range agents {
			if st := a.Stats(); !st.Connected || st.Connects <= before[i] {
				return false
			}
		}
		return true
	})
}

// totals sums the agents' counters.
type totals struct {
	connects, connectFailures, handshakeFailures, drops uint64
}

func sum(agents []*testAgent) totals {
	var s totals
	for _, a := range agents {
		st := a.Stats()
		s.connects += st.Connects
		s.connectFailures += st.ConnectFailures
		s.handshakeFailures += st.HandshakeFailures
		s.drops += st.StreamDrops
	}
	return s
}

func serverHandshakeFailures(replicas []*replica) uint64 {
	var n uint64
	for _, r := range replicas {
		n += r.srv.Stats().HandshakeFailures
	}
	return n
}

// requireNoFailures fails the test if any agent or replica saw a failed handshake
// or connection attempt.
func requireNoFailures(t *testing.T, step string, replicas []*replica, agents []*testAgent) {
	t.Helper()
	if s := sum(agents); s.connectFailures != 0 || s.handshakeFailures != 0 {
		for _, a := range agents {
			if st := a.Stats(); st.ConnectFailures+st.HandshakeFailures > 0 {
				t.Errorf("%s: %s: connect failures %v, handshake failures %v", step, a.ID(), st.ConnectFailuresByReason, st.HandshakeFailuresByReason)
			}
		}
		t.Fatalf("%s: agents saw %d failed connection attempts and %d failed handshakes, want 0", step, s.connectFailures, s.handshakeFailures)
	}
	if n := serverHandshakeFailures(replicas); n != 0 {
		for _, r := range replicas {
			t.Logf("%s: %s handshake failures: %v\n%s", step, r.name, r.srv.Stats().FailuresByReason, lastLine(r.logs.String(), "agent TLS handshake failed"))
		}
		t.Fatalf("%s: replicas saw %d failed handshakes, want 0", step, n)
	}
}

// requireServerCert fails the test unless every agent's current stream was opened
// with the server certificate want.
func requireServerCert(t *testing.T, agents []*testAgent, want *hotcerttest.Leaf) {
	t.Helper()
	fp := hotcert.FingerprintOf(want.Cert)
	for _, a := range agents {
		if got, ok := a.ServerFingerprint(); !ok || got != fp {
			t.Fatalf("%s: stream is on server certificate %x (connected %v), want serial %s", a.ID(), got[:4], ok, hotcert.FormatSerial(want.Cert.SerialNumber))
		}
	}
}

// waitForServerCert waits until every agent's current stream was opened with the
// server certificate want.
func waitForServerCert(t *testing.T, what string, agents []*testAgent, want *hotcerttest.Leaf) {
	t.Helper()
	fp := hotcert.FingerprintOf(want.Cert)
	testutil.WaitFor(t, what, func() bool {
		for _, a := range agents {
			if got, ok := a.ServerFingerprint(); !ok || got != fp {
				return false
			}
		}
		return true
	})
}

// metricValue returns the value of the metric name with the given labels (0 when
// absent).
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labels) {
				switch {
				case m.Counter != nil:
					return m.GetCounter().GetValue()
				case m.Gauge != nil:
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// remote inspects what a replica serves, as `hotcert inspect` does.
func remote(t *testing.T, r *replica, caFile string) *inspect.RemoteReport {
	t.Helper()
	rep, err := inspect.Remote(context.Background(), inspect.RemoteOptions{Address: r.addr, ServerName: "localhost", CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
