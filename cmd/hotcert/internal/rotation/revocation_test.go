package rotation_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/source/file"
)

// TestRevokedSerialEverywhere: two mTLS replicas share a deny-list volume, with
// reference agents connected to both. Before the revocation the answer for an
// agent's serial is "not refused"; one replica reading an old list keeps the
// answer at "not proven"; once both enforce it, the serial is refused everywhere
// and no connection of it is left. An unreachable replica proves nothing.
func TestRevokedSerialEverywhere(t *testing.T) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	clientCA := newVolume(t, "ca.crt", hotcerttest.BundlePEM(agentCA))
	serverTrust := newVolume(t, "server-ca.crt", hotcerttest.BundlePEM(serverCA))
	lists := []*volume{newVolume(t, "deny.list", []byte("# none\n")), newVolume(t, "deny.list", []byte("# none\n"))}
	var replicas []*replica
	for i, v := range lists {
		replicas = append(replicas, startReplica(t, fmt.Sprintf("cp-%d", i), serverCA.MustIssue(), func(c *controlplane.Config) {
			var err error
			if c.ClientCA, err = file.New(file.WithCA(clientCA.path())); err != nil {
				t.Fatal(err)
			}
			if c.DenyList, err = revocation.Files(v.path(), ""); err != nil {
				t.Fatal(err)
			}
		}))
	}
	dir := t.TempDir()
	leaves := make([]*hotcerttest.Leaf, 4)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); wg.Wait() })
	var agents []*agent.Agent
	for i := range leaves {
		leaves[i] = agentCA.MustIssue(hotcerttest.WithCommonName(fmt.Sprintf("agent-%d", i)))
		crt, key := filepath.Join(dir, fmt.Sprintf("a%d.crt", i)), filepath.Join(dir, fmt.Sprintf("a%d.key", i))
		if os.WriteFile(crt, leaves[i].ChainPEM, 0o600) != nil || os.WriteFile(key, leaves[i].KeyPEM, 0o600) != nil {
			t.Fatal("writing the agent's key pair")
		}
		a, err := agent.New(agent.Config{ID: fmt.Sprintf("agent-%d", i), Server: replicas[i%2].addr, ServerName: "localhost",
			CAFile: serverTrust.path(), CertFile: crt, KeyFile: key, Logger: discard,
			HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 10 * time.Second, ConnectTimeout: 10 * time.Second,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		wg.Go(func() { _ = a.Run(ctx) })
	}
	testutil.WaitFor(t, "the agents to connect", func() bool {
		for _, a := range agents {
			if !a.Stats().Connected {
				return false
			}
		}
		return true
	})
	o := rotation.Options{}
	for _, r := range replicas {
		o.Replicas = append(o.Replicas, rotation.Replica{Address: r.addr, StatusURL: r.status})
	}
	revoked := leaves[1] // on cp-1
	serial := hotcert.FormatSerial(revoked.Cert.SerialNumber)
	ask := func() *rotation.RevocationReport {
		t.Helper()
		rep, err := rotation.CheckRevocation(context.Background(), o, serial, "")
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := ask(); rep.Done || rep.RefusedEverywhere || rep.ConnectionsLeft != 1 {
		t.Fatalf("before the revocation: %+v", rep)
	}
	for issuer, want := range map[string]int{hotcert.FingerprintOf(agentCA.Cert).String(): 1, hotcert.FingerprintOf(serverCA.Cert).String(): 0} {
		rep, err := rotation.CheckRevocation(context.Background(), o, serial, issuer)
		if err != nil {
			t.Fatal(err)
		}
		if rep.ConnectionsLeft != want {
			t.Fatalf("before the revocation, issuer %s: %d connections, want %d", issuer, rep.ConnectionsLeft, want)
		}
	}
	entry := fmt.Appendf(nil, "serial %s issuer %s\n", serial, hotcert.FingerprintOf(agentCA.Cert))
	lists[0].set(t, entry) // cp-0 first: cp-1, where the agent is, still admits it
	testutil.WaitFor(t, "cp-0 to enforce the list", func() bool { return replicas[0].srv.DenyList().Current().Revokes(revoked.Cert.SerialNumber) })
	if rep := ask(); rep.Done || rep.RefusedEverywhere || !strings.Contains(rep.Summary, "cp-1") {
		t.Fatalf("one replica still on the old list: %+v", rep)
	}
	lists[1].set(t, entry)
	testutil.WaitFor(t, "the serial refused everywhere, no connection left", func() bool { return ask().Done })
	rep := ask()
	for _, r := range rep.Replicas {
		if r.Evidence != "reported" || r.DenyListVersion != replicas[0].srv.DenyList().Current().Version() {
			t.Errorf("replica %+v", r)
		}
	}
	// Asked per issuer, as the deny list revokes it (and the census asks):
	// the serial of another CA is not refused, and no connection has it.
	for _, c := range []struct {
		issuer string
		done   bool
	}{{hotcert.FingerprintOf(agentCA.Cert).Colon(), true}, {hotcert.FingerprintOf(serverCA.Cert).String(), false}} {
		rep, err := rotation.CheckRevocation(context.Background(), o, serial, c.issuer)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Done != c.done || rep.RefusedEverywhere != c.done || rep.ConnectionsLeft != 0 || len(rep.Issuer) != 64 {
			t.Errorf("issuer %s: %+v", c.issuer, rep)
		}
	}
	if _, err := rotation.CheckRevocation(context.Background(), o, serial, "9f86"); err == nil {
		t.Error("an issuer that is not a SHA-256 is accepted")
	}
	var b strings.Builder
	if err := rotation.WriteRevocationText(&b, rep); err != nil || !strings.Contains(b.String(), "no connection of it is left") {
		t.Errorf("text: %v\n%s", err, b.String())
	}

	o.Replicas = append(o.Replicas, rotation.Replica{Address: "127.0.0.1:1", StatusURL: "http://127.0.0.1:1/healthz"})
	if rep := ask(); rep.Done || rep.Replicas[2].Evidence != "unknown" {
		t.Errorf("with an unreachable replica: %+v", rep)
	}
}
