package controlplane_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

const nAgents = 10

// Renewing the server certificate under the same CA: established streams stay up on
// the certificate they were opened with, new connections get the new serial.
func TestRenewServerCertificateDropsNoStream(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	old := ca.MustIssue()
	replicas := []*replica{startReplica(t, "cp-0", old), startReplica(t, "cp-1", old)}
	vol := newCAVolume(t, ca)
	agents := startAgents(t, nAgents, replicas, vol)
	requireServerCert(t, agents, old)

	renewed := ca.MustIssue()
	for _, r := range replicas {
		r.serve(t, renewed)
	}
	// New connections get the new serial, by IP (no SNI) and by name (SNI).
	for _, r := range replicas {
		rep := remote(t, r, vol.path())
		if rep.Certificate.Serial != hotcert.FormatSerial(renewed.Cert.SerialNumber) || !rep.Bundle.Verified {
			t.Fatalf("%s serves serial %s (verified %v), want %s", r.name, rep.Certificate.Serial, rep.Bundle.Verified, hotcert.FormatSerial(renewed.Cert.SerialNumber))
		}
	}
	late := startAgents(t, 2, replicas, vol)
	requireServerCert(t, late, renewed)

	// Established streams: still up, still on the old certificate, still heartbeating.
	acks := make([]uint64, len(agents))
	for i, a := range agents {
		acks[i] = a.Stats().HeartbeatsAcked
	}
	testutil.WaitFor(t, "heartbeats on the old streams", func() bool {
		for i, a := range agents {
			if a.Stats().HeartbeatsAcked < acks[i]+3 {
				return false
			}
		}
		return true
	})
	if s := sum(agents); s.drops != 0 || s.connects != nAgents {
		for _, a := range agents {
			if a.Stats().StreamDrops > 0 {
				t.Logf("%s: %s", a.ID(), lastLine(a.logs.String(), "control plane stream dropped"))
			}
		}
		t.Fatalf("renewal: %d stream drops and %d connects, want 0 and %d", s.drops, s.connects, nAgents)
	}
	requireServerCert(t, agents, old)
	requireNoFailures(t, "renewal", replicas, append(agents, late...))
	for _, r := range replicas {
		if n := r.logs.Count("TLS certificate reloaded"); n != 1 {
			t.Errorf("%s logged %d reloads, want 1:\n%s", r.name, n, r.logs)
		}
		if !strings.Contains(r.logs.String(), "serial="+hotcert.FormatSerial(renewed.Cert.SerialNumber)) {
			t.Errorf("%s: reload line does not name the new serial:\n%s", r.name, r.logs)
		}
	}

	// A reconnect moves every agent onto the renewed certificate, without a failure.
	reconnectAll(t, replicas, agents)
	requireServerCert(t, agents, renewed)
	requireNoFailures(t, "reconnect after renewal", replicas, agents)
}

// The three-step CA rotation with a union bundle: zero failed handshakes across
// forced reconnects at every step, whatever the order of the CAs in the bundle.
func TestThreeStepCARotationNeverFailsAHandshake(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	oldLeaf := oldCA.MustIssue()
	replicas := []*replica{startReplica(t, "cp-0", oldLeaf), startReplica(t, "cp-1", oldLeaf)}
	vol := newCAVolume(t, oldCA)
	agents := startAgents(t, nAgents, replicas, vol)

	// Step 1: add the new CA to the bundle. Every reconnect re-reads it.
	vol.set(t, hotcerttest.BundlePEM(oldCA, newCA))
	reconnectAll(t, replicas, agents)
	for _, a := range agents {
		if n := len(a.CA().Current().TrustCertificates()); n != 2 {
			t.Fatalf("step 1: %s trusts %d CAs after reconnecting, want 2", a.ID(), n)
		}
	}
	requireNoFailures(t, "step 1", replicas, agents)

	// Step 2: switch every replica to a certificate from the new CA.
	newLeaf := newCA.MustIssue()
	for _, r := range replicas {
		r.serve(t, newLeaf)
	}
	reconnectAll(t, replicas, agents)
	requireServerCert(t, agents, newLeaf)
	requireNoFailures(t, "step 2", replicas, agents)

	// The union in the other order (trust-manager sorts by hash): still fine.
	vol.set(t, hotcerttest.BundlePEM(newCA, oldCA))
	reconnectAll(t, replicas, agents)
	requireNoFailures(t, "step 2, bundle reordered", replicas, agents)

	// Step 3: every replica serves the new CA's certificate (checked with inspect),
	// so the old CA can go.
	newOnly := writeFile(t, "new-ca.crt", hotcerttest.BundlePEM(newCA))
	for _, r := range replicas {
		if rep := remote(t, r, newOnly); !rep.Bundle.Verified {
			t.Fatalf("before step 3: %s is not verified by the new CA alone: %+v", r.name, rep.Bundle)
		}
	}
	vol.set(t, hotcerttest.BundlePEM(newCA))
	reconnectAll(t, replicas, agents)
	for _, a := range agents {
		if n := len(a.CA().Current().TrustCertificates()); n != 1 {
			t.Fatalf("step 3: %s trusts %d CAs, want 1", a.ID(), n)
		}
	}
	requireServerCert(t, agents, newLeaf)
	requireNoFailures(t, "step 3", replicas, agents)
	for _, a := range agents {
		if n := a.logs.Count("agent TLS CA bundle reloaded"); n != 3 {
			t.Errorf("%s logged %d bundle reloads, want 3 (one per bundle change):\n%s", a.ID(), n, a.logs)
		}
	}
}

// Replacing the CA in one step fails: agents that reconnect in between get
// verification errors, at once and with the x509 reason. Both directions are shown:
// the bundle switched before the server certificate, and the server certificate
// switched before the bundle. Fixing the bundle recovers every agent.
func TestOneStepCASwapFailsAgentsThatReconnect(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	oldLeaf := oldCA.MustIssue()
	replicas := []*replica{startReplica(t, "cp-0", oldLeaf), startReplica(t, "cp-1", oldLeaf)}
	vol := newCAVolume(t, oldCA)
	var events eventLog
	agents := startAgents(t, nAgents, replicas, vol, events.record)

	// Direction 1: the bundle holds only the new CA while the replicas still serve
	// the old CA's certificate.
	vol.set(t, hotcerttest.BundlePEM(newCA))
	requireFailFast(t, replicas, agents, &events, "bundle switched first")

	// Put the old CA back: agents recover on their own (backoff), nothing else to do.
	vol.set(t, hotcerttest.BundlePEM(oldCA))
	waitConnected(t, agents)
	requireServerCert(t, agents, oldLeaf)

	// Direction 2: the replicas switch to the new CA's certificate while the bundle
	// still holds only the old CA.
	newLeaf := newCA.MustIssue()
	for _, r := range replicas {
		r.serve(t, newLeaf)
	}
	requireFailFast(t, replicas, agents, &events, "server certificate switched first")

	// The union bundle (step 1 of the safe procedure) recovers everyone.
	vol.set(t, hotcerttest.BundlePEM(oldCA, newCA))
	waitConnected(t, agents)
	requireServerCert(t, agents, newLeaf)
}

// requireFailFast cuts every connection and requires every agent to fail its
// reconnect with unknown_authority, well before its 10 s connect timeout, and the
// replicas to see the agents reject their certificate.
func requireFailFast(t *testing.T, replicas []*replica, agents []*testAgent, events *eventLog, what string) {
	t.Helper()
	before := make([]uint64, len(agents))
	for i, a := range agents {
		before[i] = a.Stats().ConnectFailuresByReason["unknown_authority"]
	}
	serverBefore := rejectedByAgents(replicas)
	cut := time.Now()
	for _, r := range replicas {
		r.srv.DropConnections()
	}
	testutil.WaitFor(t, what+": every reconnecting agent to fail verification", func() bool {
		for i, a := range agents {
			if st := a.Stats(); st.Connected || st.ConnectFailuresByReason["unknown_authority"] <= before[i] {
				return false
			}
		}
		return true
	})
	for _, a := range agents {
		e, ok := events.firstAfter(a.ID(), agent.EventConnectFailed, cut)
		if !ok {
			t.Fatalf("%s: %s: no connect_failed event", what, a.ID())
		}
		// The attempt began after the cut: failing before its connect timeout could
		// have ended it, it did not wait for a deadline (however slow the machine).
		if lat := e.Time.Sub(cut); lat >= agentConnectTimeout {
			t.Errorf("%s: %s failed %s after the cut, not before its %s connect timeout: it waited instead of failing fast", what, a.ID(), lat, agentConnectTimeout)
		}
		if !strings.Contains(e.Err.Error(), "x509: certificate signed by unknown authority") {
			t.Errorf("%s: %s: error %q does not carry the x509 reason", what, a.ID(), e.Err)
		}
		// The warning is logged after the failure is counted: wait for it.
		testutil.WaitFor(t, what+": "+a.ID()+" to log the reason", func() bool {
			return strings.Contains(a.logs.String(), `reason=unknown_authority`)
		})
	}
	if rejectedByAgents(replicas) <= serverBefore {
		t.Errorf("%s: the replicas did not count the agents rejecting their certificate", what)
	}
}

func rejectedByAgents(replicas []*replica) uint64 {
	var n uint64
	for _, r := range replicas {
		n += r.srv.Stats().FailuresByReason["peer_rejected"]
	}
	return n
}

// eventLog records agent events.
type eventLog struct {
	mu     sync.Mutex
	events []agent.Event
}

func (l *eventLog) record(c *agent.Config) {
	c.OnEvent = func(e agent.Event) {
		l.mu.Lock()
		l.events = append(l.events, e)
		l.mu.Unlock()
	}
}

func (l *eventLog) firstAfter(id string, kind agent.EventKind, after time.Time) (agent.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.events {
		if e.AgentID == id && e.Kind == kind && e.Time.After(after) {
			return e, true
		}
	}
	return agent.Event{}, false
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// One replica fails to load the new CA's certificate in step 2 (its key does not
// match): it keeps serving the old CA's certificate. Its failure counter, its
// /healthz status and inspect with the new CA alone reveal it before step 3; doing
// step 3 anyway would break exactly the agents that land on it.
func TestReplicaThatKeepsTheOldLeafIsCaughtBeforeStep3(t *testing.T) {
	oldCA, newCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	oldLeaf := oldCA.MustIssue()
	good, bad := startReplica(t, "cp-0", oldLeaf), startReplica(t, "cp-1", oldLeaf)
	replicas := []*replica{good, bad}
	vol := newCAVolume(t, oldCA, newCA) // step 1 done
	agents := startAgents(t, nAgents, replicas, vol)

	// Step 2: cp-0 gets a proper pair, cp-1 the new certificate with the old key.
	newLeaf := newCA.MustIssue()
	good.serve(t, newLeaf)
	bad.write(t, newLeaf.ChainPEM, oldLeaf.KeyPEM)
	testutil.WaitFor(t, "cp-1 to report the failed reload", func() bool { return bad.failures(t) == 1 })
	reconnectAll(t, replicas, agents) // service continues on both replicas
	requireNoFailures(t, "step 2 with a broken replica", replicas, agents)

	// What an operator checks before step 3.
	if good.failures(t) != 0 {
		t.Fatalf("cp-0 failure counter = %v, want 0", good.failures(t))
	}
	line := bad.logs.String()
	if bad.logs.Count("TLS certificate reload failed") != 1 || !strings.Contains(line, "component=agent_grpc") ||
		!strings.Contains(line, bad.certPath()) || !strings.Contains(line, bad.keyPath()) || !strings.Contains(line, "reason=key_mismatch") {
		t.Fatalf("cp-1 log does not hold one failure line with listener and file paths:\n%s", line)
	}
	st := bad.srv.Status()
	if !st.Healthy || st.LastError == "" || st.ReloadFailures != 1 || st.Serving.Issuer != oldCA.Cert.Subject.String() {
		t.Fatalf("cp-1 status = %+v, want healthy, serving the old CA's certificate, with the last error", st)
	}
	newOnly := writeFile(t, "new-ca.crt", hotcerttest.BundlePEM(newCA))
	if rep := remote(t, good, newOnly); !rep.Bundle.Verified {
		t.Fatalf("cp-0 not verified by the new CA: %+v", rep.Bundle)
	}
	rep := remote(t, bad, newOnly)
	if rep.Bundle.Verified || rep.Certificate.Serial != hotcert.FormatSerial(oldLeaf.Cert.SerialNumber) ||
		!strings.Contains(rep.Bundle.CAs[0].Chain.Error, "unknown authority") {
		t.Fatalf("inspect of cp-1 with the new CA alone: %+v, want the old serial, not verified", rep)
	}

	// Step 3 anyway: agents on cp-0 are fine, agents on cp-1 are locked out.
	vol.set(t, hotcerttest.BundlePEM(newCA))
	for _, r := range replicas {
		r.srv.DropConnections()
	}
	testutil.WaitFor(t, "agents on cp-1 to fail and agents on cp-0 to reconnect", func() bool {
		for _, a := range agents {
			st := a.Stats()
			if a.replica == bad && (st.Connected || st.ConnectFailuresByReason["unknown_authority"] == 0) {
				return false
			}
			if a.replica == good && !st.Connected {
				return false
			}
		}
		return true
	})

	// Fixing cp-1's files recovers its agents without anything else.
	bad.serve(t, newLeaf)
	waitConnected(t, agents)
	requireServerCert(t, agents, newLeaf)
	if bad.failures(t) != 1 {
		t.Fatalf("cp-1 failure counter = %v after the fix, want still 1", bad.failures(t))
	}
}
