package rotation_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc/agentrpctest"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// The system under test: control plane replicas whose tls.crt/tls.key live in
// kubelet-style volumes and whose /healthz is served on loopback, and reference
// agents over real loopback gRPC whose ca.crt lives in kubelet-style volumes.

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

type replica struct {
	name   string
	srv    *controlplane.Server
	addr   string
	status string // /healthz URL
	dir    *hotcerttest.AtomicWriter
}

func (r *replica) write(t *testing.T, l *hotcerttest.Leaf) {
	t.Helper()
	if _, err := r.dir.Write(map[string][]byte{"tls.crt": l.ChainPEM, "tls.key": l.KeyPEM}); err != nil {
		t.Fatal(err)
	}
}

// serve projects leaf into the replica's volume and waits until new handshakes get it.
func (r *replica) serve(t *testing.T, l *hotcerttest.Leaf) {
	t.Helper()
	r.write(t, l)
	want := hotcert.FingerprintOf(l.Cert)
	testutil.WaitFor(t, r.name+" to serve the new leaf", func() bool { return r.srv.Certificate().Current().LeafFingerprint() == want })
}

func startReplica(t *testing.T, name string, l *hotcerttest.Leaf, mutate ...func(*controlplane.Config)) *replica {
	t.Helper()
	r := &replica{name: name, dir: hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), name))}
	r.write(t, l)
	src, err := file.New(file.WithKeyPair(filepath.Join(r.dir.Dir(), "tls.crt"), filepath.Join(r.dir.Dir(), "tls.key")),
		file.WithRewatchInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg := controlplane.Config{
		TLS: src, Replica: name, Logger: discard, ShutdownGrace: 2 * time.Second,
		ReloaderOptions: []hotcert.Option{hotcert.WithSettle(50 * time.Millisecond), hotcert.WithPollInterval(100 * time.Millisecond)},
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
	hs := httptest.NewServer(r.srv.HealthHandler())
	r.status = hs.URL + "/healthz"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: Serve: %v", name, err)
		}
	})
	return r
}

// volume is a kubelet-style volume holding one file, e.g. the agents' ca.crt.
type volume struct {
	*hotcerttest.AtomicWriter
	name string
}

func newVolume(t *testing.T, name string, data []byte) *volume {
	t.Helper()
	v := &volume{hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), name)), name}
	v.set(t, data)
	return v
}

func (v *volume) path() string { return filepath.Join(v.Dir(), v.name) }

func (v *volume) set(t *testing.T, data []byte) {
	t.Helper()
	if _, err := v.Write(map[string][]byte{v.name: data}); err != nil {
		t.Fatal(err)
	}
}

// startAgents starts reference agents named prefix-NN, spread over the replicas,
// trusting the bundle in ca, and waits until they are connected.
func startAgents(t *testing.T, prefix string, n int, replicas []*replica, ca *volume) []*agent.Agent {
	t.Helper()
	out, _ := startStoppableAgents(t, prefix, n, replicas, ca)
	return out
}

// startStoppableAgents is startAgents, and returns a function per agent that
// stops it (its stream closes: it departs) and waits until it has stopped.
func startStoppableAgents(t *testing.T, prefix string, n int, replicas []*replica, ca *volume) ([]*agent.Agent, []func()) {
	t.Helper()
	var out []*agent.Agent
	var stops []func()
	for i := range n {
		a, err := agent.New(agent.Config{
			ID: fmt.Sprintf("%s-%02d", prefix, i), Server: replicas[i%len(replicas)].addr, ServerName: "localhost",
			CAFile: ca.path(), Logger: discard,
			HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 10 * time.Second, ConnectTimeout: 10 * time.Second,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ReconnectJitter: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := a.Run(ctx); err != nil {
				t.Errorf("%s: %v", a.ID(), err)
			}
		})
		stop := sync.OnceFunc(func() { cancel(); wg.Wait() })
		t.Cleanup(stop)
		out, stops = append(out, a), append(stops, stop)
	}
	testutil.WaitFor(t, "the agents to connect", func() bool {
		for _, a := range out {
			if !a.Stats().Connected {
				return false
			}
		}
		return true
	})
	return out, stops
}

// startLegacyAgent connects an agent of an older release (no trust report) to r.
// The returned function stops it and waits until the replica has let it go.
func startLegacyAgent(t *testing.T, r *replica, id string, ca *hotcerttest.CA) (stop func()) {
	t.Helper()
	stopStream := agentrpctest.StartLegacyAgent(t, r.addr, "localhost", id, hotcerttest.Pool(ca))
	return func() {
		stopStream()
		testutil.WaitFor(t, r.name+" to let "+id+" go", func() bool {
			for _, a := range r.srv.Fleet().AgentList {
				if a.ID == id {
					return false
				}
			}
			return true
		})
	}
}

// trusting counts the agents of the replicas' fleet views that trust ca.
func trusting(replicas []*replica, ca *hotcerttest.CA) int {
	fp := hotcert.FingerprintOf(ca.Cert).String()
	n := 0
	for _, r := range replicas {
		for _, c := range r.srv.Fleet().CAs {
			if c.SHA256 == fp {
				n += c.Agents
			}
		}
	}
	return n
}

func options(t *testing.T, replicas []*replica, oldCA, newCA *hotcerttest.CA) rotation.Options {
	t.Helper()
	o := rotation.Options{
		OldCAFile:  newVolume(t, "old-ca.crt", hotcerttest.BundlePEM(oldCA)).path(),
		NewCAFile:  newVolume(t, "new-ca.crt", hotcerttest.BundlePEM(newCA)).path(),
		ServerName: "localhost",
	}
	for _, r := range replicas {
		o.Replicas = append(o.Replicas, rotation.Replica{Address: r.addr, StatusURL: r.status})
	}
	return o
}

func check(t *testing.T, o rotation.Options) *rotation.Report {
	t.Helper()
	rep, err := rotation.Check(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	requireReasons(t, rep)
	return rep
}

// requireReasons fails unless every verdict of rep says why, naming what it waits
// for: no step's why is empty or ends on an empty list ("not safe to remove CA-2025:
// "), the summary is there and every straggler has a reason.
func requireReasons(t *testing.T, rep *rotation.Report) {
	t.Helper()
	for _, st := range rep.Steps {
		if why := strings.TrimSpace(st.Why); why == "" || strings.HasSuffix(why, ":") || strings.Contains(why, ": ;") {
			t.Fatalf("step %s (safe %v, done %v) gives no reason: %q\nsummary: %s", st.Name, st.Safe, st.Done, st.Why, rep.Summary)
		}
	}
	if s := strings.TrimSpace(rep.Summary); s == "" || strings.HasSuffix(s, ":") {
		t.Fatalf("summary gives no reason: %q", rep.Summary)
	}
	for _, s := range rep.Stragglers {
		if s.Reason == "" {
			t.Fatalf("straggler %s %s has no reason", s.Kind, s.Name)
		}
	}
}

// clock is a clock the test moves by hand (controlplane.Config.Clock): how long the
// replicas have remembered a departed agent.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *clock) now() time.Time               { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration)      { c.ns.Add(int64(d)) }
func (c *clock) use(cfg *controlplane.Config) { cfg.Clock = c.now }

// requireStep fails unless the named step has the given verdict.
func requireStep(t *testing.T, rep *rotation.Report, name string, safe, done bool) {
	t.Helper()
	st, ok := rep.Step(name)
	if !ok || st.Safe != safe || st.Done != done {
		t.Fatalf("step %s: safe %v done %v (%s), want safe %v done %v\nsummary: %s", name, st.Safe, st.Done, st.Why, safe, done, rep.Summary)
	}
}
