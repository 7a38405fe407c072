package controlplane_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// startLegacyAgent holds a stream the way an agent of an older release does: a
// register and heartbeats without a trust report (it read its bundle at start).
func startLegacyAgent(t *testing.T, r *replica, id string, ca *hotcerttest.CA) {
	t.Helper()
	creds := credentials.NewTLS(&tls.Config{RootCAs: hotcerttest.Pool(ca), ServerName: "localhost", MinVersion: tls.VersionTLS12})
	cc, err := grpc.NewClient("passthrough:///"+r.addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; cc.Close() })
	stream, err := cc.NewStream(ctx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: id}); err != nil {
		t.Fatal(err)
	}
	if m, err := agentrpc.Recv(stream); err != nil || m.Type != agentrpc.TypeRegistered {
		t.Fatalf("legacy agent %s: %+v, %v", id, m, err)
	}
	go func() {
		defer close(done)
		for seq := uint64(1); ; seq++ {
			if agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeHeartbeat, Seq: seq}) != nil {
				return
			}
			if _, err := agentrpc.Recv(stream); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// TestFleetViewCountsAgentsPerCA: each replica counts, per CA fingerprint, the
// connected agents that trust it, names what each agent trusts, shows an agent of
// an older release as unknown, follows a bundle change with the next heartbeat
// (no reconnect), and exports counts — never one series per agent.
func TestFleetViewCountsAgentsPerCA(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	leaf := oldCA.MustIssue()
	replicas := []*replica{startReplica(t, "cp-0", leaf), startReplica(t, "cp-1", leaf)}
	vol := newCAVolume(t, oldCA)
	agents := startAgents(t, 6, replicas, vol)
	startLegacyAgent(t, replicas[0], "legacy-0", oldCA)
	oldFP, newFP := hotcert.FingerprintOf(oldCA.Cert).String(), hotcert.FingerprintOf(newCA.Cert).String()

	fleet := func(r *replica) controlplane.Fleet { return r.srv.Fleet() }
	testutil.WaitFor(t, "cp-0 to see 3 agents and the legacy one", func() bool { return fleet(replicas[0]).Agents == 4 })
	f := fleet(replicas[0])
	if len(f.CAs) != 1 || f.CAs[0].SHA256 != oldFP || f.CAs[0].Agents != 3 || f.CAs[0].Subject != oldCA.Cert.Subject.String() ||
		f.ByTrustReading[controlplane.TrustPerConnect] != 3 || f.ByTrustReading[controlplane.TrustUnknown] != 1 {
		t.Fatalf("cp-0 fleet: %+v", f)
	}
	for _, a := range f.AgentList {
		switch {
		case a.ID == "legacy-0" && (a.TrustReading != controlplane.TrustUnknown || a.CAs != nil || a.ReportedAt != nil):
			t.Fatalf("legacy agent: %+v", a)
		case a.ID != "legacy-0" && (a.TrustReading != controlplane.TrustPerConnect || len(a.CAs) != 1 || a.CAs[0] != oldFP || a.ReportedAt == nil):
			t.Fatalf("agent: %+v", a)
		}
	}

	// The union bundle reaches the agents' volume: their next heartbeats report it.
	vol.set(t, hotcerttest.BundlePEM(newCA, oldCA))
	trusting := func(r *replica, fp string) int {
		for _, c := range fleet(r).CAs {
			if c.SHA256 == fp {
				return c.Agents
			}
		}
		return 0
	}
	testutil.WaitFor(t, "every agent to report CA-2026", func() bool {
		return trusting(replicas[0], newFP) == 3 && trusting(replicas[1], newFP) == 3
	})
	if s := sum(agents); s.connects != 6 {
		t.Fatalf("%d connects: a bundle change must be reported without reconnecting", s.connects)
	}

	// Metrics: one series per CA and per reading, whatever the number of agents.
	if v := metricValue(t, replicas[0].reg, "hotcert_controlplane_agents_trusting_ca", map[string]string{"sha256": newFP, "subject": newCA.Cert.Subject.String()}); v != 3 {
		t.Fatalf("agents_trusting_ca{CA-2026} = %v, want 3", v)
	}
	if v := metricValue(t, replicas[0].reg, "hotcert_controlplane_agents_by_trust_reading", map[string]string{"reading": "unknown"}); v != 1 {
		t.Fatalf("agents_by_trust_reading{unknown} = %v, want 1", v)
	}
	mfs, err := replicas[0].reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "hotcert_controlplane_agents_trusting_ca" && len(mf.GetMetric()) != 2 {
			t.Fatalf("%d agents_trusting_ca series, want 2 (one per CA)", len(mf.GetMetric()))
		}
	}

	// /healthz carries the fleet view and what the replica holds.
	rec := httptest.NewRecorder()
	replicas[1].srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var st controlplane.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Fleet.Agents != 3 || len(st.Fleet.CAs) != 2 || st.Held.Leaf == nil || st.Held.Leaf.SHA256 != hotcert.FingerprintOf(leaf.Cert).String() ||
		st.Held.Leaf.Serial != hotcert.FormatSerial(leaf.Cert.SerialNumber) || st.Held.Generation != 1 {
		t.Fatalf("cp-1 /healthz: fleet %+v held %+v", st.Fleet, st.Held)
	}

	// The agent's own status says what it holds.
	ast := agents[0].Status()
	if len(ast.Held.CAs) != 2 || ast.Held.CAs[0].SHA256 != newFP || ast.Held.Generation != 2 {
		t.Fatalf("agent status held: %+v", ast.Held)
	}
}
