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
)

// With DrainBeforeExpiry, an agent whose client certificate was renewed but whose
// stream still runs on the old one is moved onto the renewed one before the old one
// expires, with the reason counted; an agent whose certificate is valid stays.
func TestDrainBeforeExpiryMovesAnAgentOffItsExpiringCertificate(t *testing.T) {
	now := time.Now()
	clk := hotcerttest.NewFakeClock(now)
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	r := startReplica(t, "cp-0", serverCA.MustIssue(hotcerttest.WithLifetime(24*time.Hour)), withClientCA(t, newCAVolume(t, agentCA)),
		func(c *controlplane.Config) {
			c.DrainBeforeExpiry, c.DrainWindow, c.ExpiryClock = time.Minute, 10*time.Second, clk
		})
	vol := newCAVolume(t, serverCA)
	expiring := agentCA.MustIssue(hotcerttest.WithCommonName("agent-expiring"), hotcerttest.WithValidity(now.Add(-time.Hour), now.Add(time.Hour)))
	id := newIdentity(t, expiring)
	moved := startAgents(t, 1, []*replica{r}, vol, id.use, func(c *agent.Config) { c.ID, c.Watch = "agent-expiring", true })[0]
	kept := startAgents(t, 1, []*replica{r}, vol, newIdentity(t, agentCA.MustIssue(hotcerttest.WithCommonName("agent-valid"), hotcerttest.WithLifetime(24*time.Hour))).use,
		func(c *agent.Config) { c.ID = "agent-valid" })[0]
	keptDrops := kept.Stats().StreamDrops
	renewed := agentCA.MustIssue(hotcerttest.WithCommonName("agent-expiring"), hotcerttest.WithLifetime(24*time.Hour))
	id.set(renewed) // the agent does not reconnect for it by itself (ReconnectOnCertChange 0)
	testutil.WaitFor(t, "the agent to have read its renewed certificate", func() bool {
		return moved.ClientCertificate().Current().LeafFingerprint() == hotcert.FingerprintOf(renewed.Cert)
	})

	clk.Advance(expiring.Cert.NotAfter.Add(-time.Minute).Sub(now))
	testutil.WaitFor(t, "the server to see the renewed client certificate", func() bool {
		for _, a := range r.srv.Agents() {
			if a.ClientSerial == hotcert.FormatSerial(renewed.Cert.SerialNumber) {
				return true
			}
		}
		return false
	})
	if v := metricValue(t, r.reg, "hotcert_tls_connections_drained_total", map[string]string{"component": "agent_grpc", "reason": "peer_cert_expiring"}); v != 1 {
		t.Errorf("connections drained before expiry = %v, want 1", v)
	}
	if !strings.Contains(r.logs.String(), "draining connection before its certificate expires") || strings.Contains(r.logs.String(), "CN=agent-valid") {
		t.Errorf("want one drain line, for agent-expiring:\n%s", r.logs)
	}
	if kept.Stats().StreamDrops != keptDrops {
		t.Error("the agent whose certificate is valid was disconnected")
	}
	requireNoFailures(t, "expiry drain", []*replica{r}, []*testAgent{moved, kept})
}

// With ReconnectBeforeExpiry, an agent re-handshakes before the server certificate
// it verified or its own client certificate expires, onto the renewed ones, even
// when the server does not drain it (no drain window, no expiry drain).
func TestAgentReconnectsBeforeACertificateOfItsConnectionExpires(t *testing.T) {
	for _, side := range []string{"server", "client"} {
		t.Run(side, func(t *testing.T) {
			now := time.Now()
			clk := hotcerttest.NewFakeClock(now)
			serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
			expiring := func(ca *hotcerttest.CA) *hotcerttest.Leaf {
				return ca.MustIssue(hotcerttest.WithValidity(now.Add(-time.Hour), now.Add(time.Hour)))
			}
			valid := func(ca *hotcerttest.CA) *hotcerttest.Leaf {
				return ca.MustIssue(hotcerttest.WithLifetime(24 * time.Hour))
			}
			serverLeaf, clientLeaf := valid(serverCA), valid(agentCA)
			first := serverLeaf
			if side == "server" {
				serverLeaf = expiring(serverCA)
				first = serverLeaf
			} else {
				clientLeaf = expiring(agentCA)
				first = clientLeaf
			}
			r := startReplica(t, "cp-0", serverLeaf, withClientCA(t, newCAVolume(t, agentCA)))
			id := newIdentity(t, clientLeaf)
			var events eventLog
			// The client side has no window: ReconnectOnCertChange, its window, would
			// also reconnect for the rotation, on the wall clock.
			window := 10 * time.Second
			if side == "client" {
				window = 0
			}
			a := startAgents(t, 1, []*replica{r}, newCAVolume(t, serverCA), id.use, events.record, func(c *agent.Config) {
				c.Watch, c.ReconnectBeforeExpiry, c.ReconnectOnCertChange, c.ExpiryClock = true, time.Minute, window, clk
			})[0]
			renewedServer, renewedClient := valid(serverCA), valid(agentCA)
			if side == "server" {
				r.serve(t, renewedServer) // no drain: the agent must move by itself
			} else {
				id.set(renewedClient)
				testutil.WaitFor(t, "the agent to have read its renewed certificate", func() bool {
					return a.ClientCertificate().Current().LeafFingerprint() == hotcert.FingerprintOf(renewedClient.Cert)
				})
			}
			clk.Advance(first.Cert.NotAfter.Add(-time.Minute).Sub(now))
			testutil.WaitFor(t, "the agent to reconnect onto the renewed certificate", func() bool {
				if side == "server" {
					fp, ok := a.ServerFingerprint()
					return ok && fp == hotcert.FingerprintOf(renewedServer.Cert)
				}
				for _, s := range r.srv.Agents() {
					return s.ClientSerial == hotcert.FormatSerial(renewedClient.Cert.SerialNumber)
				}
				return false
			})
			events.mu.Lock()
			var reasons []string
			for _, ev := range events.events {
				if ev.Kind == agent.EventStreamDropped {
					reasons = append(reasons, ev.Reason)
				}
			}
			events.mu.Unlock()
			if len(reasons) != 1 || reasons[0] != agent.ReasonCertExpiring {
				t.Fatalf("stream ends %q, want one %q", reasons, agent.ReasonCertExpiring)
			}
			requireNoFailures(t, "reconnect before expiry", []*replica{r}, []*testAgent{a})
		})
	}
}
