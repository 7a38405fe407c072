package controlplane_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// mTLS: agents present client certificates re-read on every connection; an agent
// without one is refused at once, with a reason.
func TestMutualTLSWithClientCertificateRotation(t *testing.T) {
	serverCA, agentCA := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	clientCAs := newCAVolume(t, agentCA)
	r := startReplica(t, "cp-0", serverCA.MustIssue(), withClientCA(t, clientCAs))
	vol := newCAVolume(t, serverCA)

	first := agentCA.MustIssue(hotcerttest.WithCommonName("agent-00"))
	id := newIdentity(t, first)
	agents := startAgents(t, 1, []*replica{r}, vol, id.use)
	clientSerial := func() string {
		for _, a := range r.srv.Agents() {
			return a.ClientSerial
		}
		return ""
	}
	// The agent counts itself connected before the server has registered its
	// stream: wait for the server's view rather than read it once.
	testutil.WaitFor(t, "the server to see the first client serial", func() bool {
		return clientSerial() == hotcert.FormatSerial(first.Cert.SerialNumber)
	})

	// The agent's certificate is renewed: the next connection presents the new one.
	second := agentCA.MustIssue(hotcerttest.WithCommonName("agent-00"))
	id.set(second)
	reconnectAll(t, []*replica{r}, agents)
	testutil.WaitFor(t, "the server to see the renewed client serial", func() bool {
		return clientSerial() == hotcert.FormatSerial(second.Cert.SerialNumber)
	})
	requireNoFailures(t, "client certificate renewal", []*replica{r}, agents)

	// An agent without a client certificate is refused, fast, with a reason.
	// Its connect timeout is an hour: a refusal seen within the wait below came at
	// once, not after a deadline.
	a, err := agent.New(agent.Config{Server: r.addr, CAFile: vol.path(), ServerName: "localhost", MinBackoff: time.Second, ConnectTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rejectedBefore := r.srv.Stats().FailuresByReason[agentrpc.ReasonNoClientCert]
	runAgent(t, a)
	testutil.WaitFor(t, "the agent without a certificate to be refused", func() bool { return a.Stats().ConnectFailures > 0 })
	// TLS 1.3 lets the client finish its handshake before the server refuses it: the
	// agent sees the alert, or the connection closing under its first write.
	for reason := range a.Stats().ConnectFailuresByReason {
		if reason != agentrpc.ReasonPeerRejected && reason != agentrpc.ReasonUnreachable {
			t.Fatalf("refused agent: reasons %v", a.Stats().ConnectFailuresByReason)
		}
	}
	// The agent can see the refusal before the server has counted it.
	testutil.WaitFor(t, "the server to count a no_client_certificate refusal", func() bool {
		return r.srv.Stats().FailuresByReason[agentrpc.ReasonNoClientCert] > rejectedBefore
	})
}

// MaxConnectionAge moves agents onto a renewed certificate by itself, without a
// failed handshake.
func TestMaxConnectionAgeMovesAgentsToTheRenewedCertificate(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	r := startReplica(t, "cp-0", ca.MustIssue(), func(c *controlplane.Config) {
		c.MaxConnectionAge, c.MaxConnectionAgeGrace = 300*time.Millisecond, 100*time.Millisecond
	})
	agents := startAgents(t, 4, []*replica{r}, newCAVolume(t, ca))
	renewed := ca.MustIssue()
	r.serve(t, renewed)
	waitForServerCert(t, "every agent to reconnect onto the renewed certificate", agents, renewed)
	requireNoFailures(t, "max connection age", []*replica{r}, agents)
}

// Work is pushed on the stream, periodically and on demand.
func TestWorkItemsArePushedToAgents(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	r := startReplica(t, "cp-0", ca.MustIssue(), func(c *controlplane.Config) { c.WorkInterval = 20 * time.Millisecond })
	var events eventLog
	agents := startAgents(t, 3, []*replica{r}, newCAVolume(t, ca), events.record)
	testutil.WaitFor(t, "periodic work and heartbeats on every agent", func() bool {
		for _, a := range agents {
			if st := a.Stats(); st.WorkItems < 2 || st.HeartbeatsAcked < 1 {
				return false
			}
		}
		return true
	})
	if n := r.srv.Broadcast("rotate-now"); n != len(agents) {
		t.Fatalf("Broadcast reached %d agents, want %d", n, len(agents))
	}
	testutil.WaitFor(t, "the broadcast payload", func() bool {
		events.mu.Lock()
		defer events.mu.Unlock()
		n := 0
		for _, e := range events.events {
			if e.Kind == agent.EventWork && e.Payload == "rotate-now" {
				n++
			}
		}
		return n == len(agents)
	})
	if st := r.srv.Stats(); st.WorkItemsSent == 0 || st.HeartbeatsReceived == 0 || st.ConnectedAgents != len(agents) {
		t.Fatalf("server stats %+v", st)
	}
}

// /healthz answers 200 while the served certificate is valid, even after a failed
// reload, and 503 once it has expired.
func TestHealthzFailsOnlyOnceTheServedCertificateExpired(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	// X.509 times have a one-second resolution: this expires in 2 to 3 s.
	r := startReplica(t, "cp-0", ca.MustIssue(hotcerttest.WithLifetime(3*time.Second)))
	code := func() (int, controlplane.Status) {
		rec := httptest.NewRecorder()
		r.srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		var st controlplane.Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatal(err)
		}
		return rec.Code, st
	}
	r.write(t, ca.MustIssue().ChainPEM, []byte("not a key"))
	testutil.WaitFor(t, "the failed reload", func() bool { return r.failures(t) == 1 })
	if c, st := code(); c != 200 || !st.Healthy || st.LastError == "" || st.ReloadFailures != 1 {
		t.Fatalf("after a failed reload: %d %+v", c, st)
	}
	testutil.WaitFor(t, "the served certificate to expire", func() bool { c, _ := code(); return c == 503 })
}
