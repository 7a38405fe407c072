package rotation_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sync"
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

func startReplica(t *testing.T, name string, l *hotcerttest.Leaf) *replica {
	t.Helper()
	r := &replica{name: name, dir: hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), name))}
	r.write(t, l)
	src, err := file.New(file.WithKeyPair(filepath.Join(r.dir.Dir(), "tls.crt"), filepath.Join(r.dir.Dir(), "tls.key")),
		file.WithRewatchInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	r.srv, err = controlplane.New(controlplane.Config{
		TLS: src, Replica: name, Logger: discard, ShutdownGrace: 2 * time.Second,
		ReloaderOptions: []hotcert.Option{hotcert.WithSettle(50 * time.Millisecond), hotcert.WithPollInterval(100 * time.Millisecond)},
	})
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
	var out []*agent.Agent
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
		t.Cleanup(func() { cancel(); wg.Wait() })
		out = append(out, a)
	}
	testutil.WaitFor(t, "the agents to connect", func() bool {
		for _, a := range out {
			if !a.Stats().Connected {
				return false
			}
		}
		return true
	})
	return out
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
	return rep
}

// requireStep fails unless the named step has the given verdict.
func requireStep(t *testing.T, rep *rotation.Report, name string, safe, done bool) {
	t.Helper()
	st, ok := rep.Step(name)
	if !ok || st.Safe != safe || st.Done != done {
		t.Fatalf("step %s: safe %v done %v (%s), want safe %v done %v\nsummary: %s", name, st.Safe, st.Done, st.Why, safe, done, rep.Summary)
	}
}
