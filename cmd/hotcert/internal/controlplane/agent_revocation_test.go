package controlplane_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/revocation"
)

// TestAgentDropsARevokedControlPlane: an agent given a deny list reports its
// version in the fleet view; when the list revokes the certificate the control
// plane served its connection with, the agent closes that connection and refuses
// to reconnect to it; once the replica serves a renewed certificate the agent is
// back.
func TestAgentDropsARevokedControlPlane(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	r := startReplica(t, "cp-0", leaf)
	v := newCAVolume(t, ca)
	deny := denyVolume{hotcerttest.MustNewAtomicWriter(filepath.Join(t.TempDir(), "agent-deny"))}
	deny.write(t, "# nothing revoked\n", nil)
	a := startAgent(t, r, agent.Config{ID: "agent-0", CAFile: v.path(), ServerName: "localhost", Watch: true}, func(c *agent.Config) {
		src, err := revocation.Files(filepath.Join(deny.Dir(), "deny.list"), "")
		if err != nil {
			t.Fatal(err)
		}
		c.DenyList = src
	})
	waitConnected(t, []*testAgent{a})
	testutil.WaitFor(t, "the agent's deny-list version in the fleet view", func() bool {
		f := r.srv.Fleet()
		return len(f.AgentList) == 1 && f.AgentList[0].DenyListVersion != ""
	})

	denied := func() float64 {
		return metricValue(t, a.reg, "hotcert_tls_deny_list_denied_connections", map[string]string{"component": agent.ComponentDenyList})
	}
	if n, err := promtestutil.GatherAndCount(a.reg, "hotcert_tls_deny_list_denied_connections"); err != nil || n != 1 || denied() != 0 {
		t.Fatalf("denied connections before the revocation: %d series (%v), value %v", n, err, denied())
	}
	deny.write(t, fmt.Sprintf("serial %s issuer %s\n", hotcert.FormatSerial(leaf.Cert.SerialNumber), hotcert.FingerprintOf(ca.Cert)), nil)
	testutil.WaitFor(t, "the agent to drop the revoked control plane", func() bool { return !a.Stats().Connected })
	if v := denied(); v != 0 {
		t.Errorf("denied connections once the agent dropped the revoked control plane: %v", v)
	}
	if !strings.Contains(a.logs.String(), "closing connection: control plane certificate revoked") {
		t.Errorf("no cut line:\n%s", a.logs)
	}
	failures := a.Stats().HandshakeFailures
	testutil.WaitFor(t, "a refused reconnect", func() bool { return a.Stats().HandshakeFailures > failures })
	if a.Stats().Connected {
		t.Fatal("the agent reconnected to the revoked certificate")
	}
	r.serve(t, ca.MustIssue())
	waitConnected(t, []*testAgent{a})
}
