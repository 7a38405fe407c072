package controlplane_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/source/file"
)

// With a drain window, a renewal moves every agent onto the new certificate by
// itself: streams end cleanly (server_closed), agents re-open at once, and nothing
// fails.
func TestDrainWindowMovesAgentsOntoTheRenewedCertificate(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	r := startReplica(t, "cp-0", ca.MustIssue(), func(c *controlplane.Config) {
		c.DrainWindow, c.DrainGrace = 400*time.Millisecond, 5*time.Second
	})
	var events eventLog
	agents := startAgents(t, 6, []*replica{r}, newCAVolume(t, ca), events.record)
	renewed := ca.MustIssue()
	r.serve(t, renewed)
	waitForServerCert(t, "every agent on the renewed certificate", agents, renewed)
	requireNoFailures(t, "drain", []*replica{r}, agents)
	events.mu.Lock()
	defer events.mu.Unlock()
	drops := 0
	for _, ev := range events.events {
		if ev.Kind == agent.EventStreamDropped {
			drops++
			if ev.Reason != agent.ReasonServerClosed {
				t.Errorf("%s: stream ended with %q (%v), want a clean server_closed", ev.AgentID, ev.Reason, ev.Err)
			}
		}
	}
	if drops != len(agents) {
		t.Errorf("%d stream ends for %d agents: each should be drained exactly once", drops, len(agents))
	}
	if v := metricValue(t, r.reg, "hotcert_tls_connections_drained_total", map[string]string{"component": "agent_grpc", "reason": "identity"}); v != float64(len(agents)) {
		t.Errorf("connections drained = %v, want %d", v, len(agents))
	}
}

// With CutUntrusted, removing a CA from the client-CA bundle disconnects the agents it
// signed, at once and with a log line, and leaves the others alone.
func TestCutUntrustedDisconnectsOnlyPeersWhoseCAWasRemoved(t *testing.T) {
	serverCA, caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	clientCAs := newCAVolume(t, caA, caB)
	r := startReplica(t, "cp-0", serverCA.MustIssue(), withClientCA(t, clientCAs, file.WithRewatchInterval(50*time.Millisecond)),
		func(c *controlplane.Config) { c.CutUntrusted = true })
	vol := newCAVolume(t, serverCA)
	withCert := func(leaf *hotcerttest.Leaf) func(*agent.Config) {
		id := newIdentity(t, leaf)
		return func(c *agent.Config) {
			id.use(c)
			c.MinBackoff, c.MaxBackoff = time.Minute, time.Minute // a refused agent stays refused during the test
		}
	}
	kept := startAgents(t, 1, []*replica{r}, vol, withCert(caB.MustIssue(hotcerttest.WithCommonName("agent-b"))))[0]
	cut := startAgents(t, 1, []*replica{r}, vol, withCert(caA.MustIssue(hotcerttest.WithCommonName("agent-a"))))[0]
	keptDrops := kept.Stats().StreamDrops

	clientCAs.set(t, hotcerttest.BundlePEM(caB)) // caA is removed
	testutil.WaitFor(t, "the agent signed by the removed CA to be cut", func() bool {
		_, connected := cut.ServerFingerprint()
		return !connected
	})
	if !strings.Contains(r.logs.String(), "peer certificate no longer trusted") || !strings.Contains(r.logs.String(), "CN=agent-a") {
		t.Fatalf("no log line naming the cut peer:\n%s", r.logs)
	}
	if strings.Contains(r.logs.String(), "CN=agent-b") {
		t.Fatal("the trusted agent was named as cut")
	}
	if _, ok := kept.ServerFingerprint(); !ok || kept.Stats().StreamDrops != keptDrops {
		t.Fatal("the agent whose CA stays was disconnected")
	}
	if v := metricValue(t, r.reg, "hotcert_tls_connections_cut_total", map[string]string{"component": "agent_grpc"}); v != 1 {
		t.Fatalf("connections cut = %v, want 1", v)
	}
}

// An agent whose own client certificate rotates re-handshakes within its window, so
// the server sees the new certificate without waiting for a drop.
func TestAgentReconnectsToPresentItsRotatedCertificate(t *testing.T) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	clientCAs := newCAVolume(t, agentCA)
	r := startReplica(t, "cp-0", serverCA.MustIssue(), withClientCA(t, clientCAs))
	first := agentCA.MustIssue(hotcerttest.WithCommonName("agent-00"))
	id := newIdentity(t, first)
	agents := startAgents(t, 1, []*replica{r}, newCAVolume(t, serverCA), func(c *agent.Config) {
		id.use(c)
		c.ReconnectOnCertChange = 200 * time.Millisecond
	})
	second := agentCA.MustIssue(hotcerttest.WithCommonName("agent-00"))
	id.set(second)
	testutil.WaitFor(t, "the server to see the rotated client certificate", func() bool {
		for _, a := range r.srv.Agents() {
			return a.ClientSerial == hotcert.FormatSerial(second.Cert.SerialNumber)
		}
		return false
	})
	requireNoFailures(t, "client certificate rotation", []*replica{r}, agents)
}
