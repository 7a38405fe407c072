package controlplane_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc/agentrpctest"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

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
	agentrpctest.StartLegacyAgent(t, replicas[0].addr, "localhost", "legacy-0", hotcerttest.Pool(oldCA))
	oldFP, newFP := hotcert.FingerprintOf(oldCA.Cert).String(), hotcert.FingerprintOf(newCA.Cert).String()

	fleet := func(r *replica) agentrpc.Fleet { return r.srv.Fleet() }
	testutil.WaitFor(t, "cp-0 to see 3 agents and the legacy one", func() bool { return fleet(replicas[0]).Agents == 4 })
	f := fleet(replicas[0])
	if len(f.CAs) != 1 || f.CAs[0].SHA256 != oldFP || f.CAs[0].Agents != 3 || f.CAs[0].Subject != oldCA.Cert.Subject.String() ||
		f.ByTrustReading[agentrpc.TrustPerConnect] != 3 || f.ByTrustReading[agentrpc.TrustUnknown] != 1 {
		t.Fatalf("cp-0 fleet: %+v", f)
	}
	for _, a := range f.AgentList {
		switch {
		case a.ID == "legacy-0" && (a.TrustReading != agentrpc.TrustUnknown || a.CAs != nil || a.ReportedAt != nil):
			t.Fatalf("legacy agent: %+v", a)
		case a.ID != "legacy-0" && (a.TrustReading != agentrpc.TrustPerConnect || len(a.CAs) != 1 || a.CAs[0] != oldFP || a.ReportedAt == nil):
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

// TestFleetViewNamesTheAgentsClientCertificate: under mTLS, the fleet view says
// which client leaf each agent presents, and the client CA bundle the replica holds.
func TestFleetViewNamesTheAgentsClientCertificate(t *testing.T) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA(hotcerttest.WithCommonName("agents-2026"))
	clientCAs := newCAVolume(t, agentCA)
	r := startReplica(t, "cp-0", serverCA.MustIssue(), withClientCA(t, clientCAs))
	leaf := agentCA.MustIssue(hotcerttest.WithCommonName("agent-00"))
	startAgents(t, 1, []*replica{r}, newCAVolume(t, serverCA), newIdentity(t, leaf).use)
	// The agent is connected once it reads the registered reply, which the replica
	// sends before it lists the session: wait for the listing, not for luck.
	testutil.WaitFor(t, "the replica to list the agent", func() bool { return len(r.srv.Fleet().AgentList) == 1 })
	f := r.srv.Fleet()
	if len(f.AgentList) != 1 || f.AgentList[0].ClientCert == nil || f.AgentList[0].ClientCert.SHA256 != hotcert.FingerprintOf(leaf.Cert).String() ||
		f.AgentList[0].ClientCert.Serial != hotcert.FormatSerial(leaf.Cert.SerialNumber) || f.AgentList[0].ClientCert.Issuer != agentCA.Cert.Subject.String() {
		t.Fatalf("fleet agent under mTLS: %+v", f.AgentList)
	}
	st := r.srv.Status()
	if st.ClientCAHeld == nil || len(st.ClientCAHeld.CAs) != 1 || st.ClientCAHeld.CAs[0].Subject != agentCA.Cert.Subject.String() {
		t.Fatalf("client CA held: %+v", st.ClientCAHeld)
	}
}
