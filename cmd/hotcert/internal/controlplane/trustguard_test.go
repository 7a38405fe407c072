package controlplane_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(t)
	return c
}

func (c *fakeClock) now() time.Time  { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }

func serverGuard(margin time.Duration, clock func() time.Time) func(*controlplane.Config) {
	return func(c *controlplane.Config) {
		c.TrustGuard, c.TrustGuardMargin, c.TrustGuardInterval, c.Clock = true, margin, 20*time.Millisecond, clock
	}
}

func agentGuard(max time.Duration, clock func() time.Time, revoked ...hotcert.Fingerprint) func(*agent.Config) {
	return func(c *agent.Config) {
		c.TrustGuard, c.TrustGuardMax, c.Clock, c.RevokedCAs = true, max, clock, revoked
	}
}

// requireServing fails unless the replica's next handshake serves want.
func requireServing(t *testing.T, r *replica, want *hotcerttest.Leaf, what string) {
	t.Helper()
	if got := r.srv.Serving().Current().LeafFingerprint(); got != hotcert.FingerprintOf(want.Cert) {
		t.Fatalf("%s: %s serves %x, want serial %s", what, r.name, got[:4], hotcert.FormatSerial(want.Cert.SerialNumber))
	}
}

// loadAndWaitHeld writes leaf into every replica and waits until each has loaded it
// and its trust guard holds it back.
func loadAndWaitHeld(t *testing.T, replicas []*replica, leaf *hotcerttest.Leaf) {
	t.Helper()
	fp := hotcert.FingerprintOf(leaf.Cert)
	for _, r := range replicas {
		r.write(t, leaf.ChainPEM, leaf.KeyPEM)
		testutil.WaitFor(t, r.name+" to load and hold back the new leaf", func() bool {
			return r.srv.Certificate().Current().LeafFingerprint() == fp &&
				metricValue(t, r.reg, "hotcert_controlplane_trust_guard_held", nil) == 1
		})
	}
}

// The unsafe one-step CA swap, made safe by both guards: the replicas load a leaf
// of the new CA while every agent trusts only the old one (the server guard holds it
// back), then the agents' bundle goes from the old CA straight to the new one (the
// agent guard keeps the old CA, whose leaf is still served). The agents' reports now
// name the new CA, so the replicas serve the new leaf; the agents' next handshakes
// land on it and they drop the old CA. No handshake fails on the way.
func TestTrustGuardsCompleteAOneStepCASwapWithZeroFailedHandshakes(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA old"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA new"))
	oldLeaf, newLeaf := oldCA.MustIssue(), newCA.MustIssue()
	replicas := []*replica{
		startReplica(t, "cp-0", oldLeaf, serverGuard(time.Hour, time.Now)),
		startReplica(t, "cp-1", oldLeaf, serverGuard(time.Hour, time.Now)),
	}
	vol := newCAVolume(t, oldCA)
	agents := startAgents(t, nAgents, replicas, vol, agentGuard(time.Hour, time.Now))

	// The new leaf arrives first: held back, the old one keeps serving, even to
	// agents that reconnect.
	loadAndWaitHeld(t, replicas, newLeaf)
	for _, r := range replicas {
		requireServing(t, r, oldLeaf, "held")
		if n := metricValue(t, r.reg, "hotcert_controlplane_trust_guard_agents_lacking_issuer", nil); n != nAgents/2 {
			t.Errorf("%s: %v agents lacking the issuer, want %d", r.name, n, nAgents/2)
		}
		if st := r.srv.Status(); st.Serving.Serial != hotcert.FormatSerial(oldLeaf.Cert.SerialNumber) || st.Held.Leaf.Serial != hotcert.FormatSerial(newLeaf.Cert.SerialNumber) {
			t.Errorf("%s: status serves %s and holds %s, want the old leaf served and the new one held", r.name, st.Serving.Serial, st.Held.Leaf.Serial)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent 0: %+v\n%s\nreplica 0:\n%s", agents[0].Stats(), agents[0].logs, replicas[0].logs)
		}
	})
	reconnectAll(t, replicas, agents)
	requireServerCert(t, agents, oldLeaf)
	requireNoFailures(t, "new leaf held back", replicas, agents)
	for _, r := range replicas {
		if n := r.logs.Count("server certificate held back: connected agents do not trust its issuer"); n != 1 {
			t.Errorf("%s logged %d held-back lines, want 1:\n%s", r.name, n, r.logs)
		}
	}

	// One step: the bundle now holds only the new CA.
	vol.set(t, hotcerttest.BundlePEM(newCA))
	for _, r := range replicas {
		testutil.WaitFor(t, r.name+" to serve the new leaf", func() bool {
			return r.srv.Serving().Current().LeafFingerprint() == hotcert.FingerprintOf(newLeaf.Cert)
		})
		if v := metricValue(t, r.reg, "hotcert_controlplane_trust_guard_held", nil); v != 0 {
			t.Errorf("%s: trust guard still holds after releasing (%v)", r.name, v)
		}
	}
	for _, a := range agents {
		if fp, ok := a.KeptCA(); !ok || fp != hotcert.FingerprintOf(oldCA.Cert) {
			t.Errorf("%s: keeps %x (%v), want the old CA kept while the old leaf serves", a.ID(), fp[:4], ok)
		}
	}
	requireNoFailures(t, "bundle swapped in one step", replicas, agents)

	reconnectAll(t, replicas, agents)
	requireServerCert(t, agents, newLeaf)
	requireNoFailures(t, "agents on the new leaf", replicas, agents)
	for _, a := range agents {
		if _, ok := a.KeptCA(); ok {
			t.Errorf("%s still keeps the old CA after landing on a new-CA leaf", a.ID())
		}
		if n := len(a.Trust().Current().TrustCertificates()); n != 1 {
			t.Errorf("%s trusts %d CAs, want the new one only", a.ID(), n)
		}
		if n := a.logs.Count("agent trust guard keeps trusting a CA removed from its bundle: the control plane still serves a leaf it issued"); n != 1 {
			t.Errorf("%s logged keeping %d times, want 1:\n%s", a.ID(), n, a.logs)
		}
	}
	// The old CA is gone for good: a reconnect still verifies, against the new CA.
	reconnectAll(t, replicas, agents)
	requireNoFailures(t, "after the swap", replicas, agents)
	for _, r := range replicas {
		if n := r.logs.Count("server certificate released: every connected agent trusts its issuer"); n != 1 {
			t.Errorf("%s logged %d release lines, want 1:\n%s", r.name, n, r.logs)
		}
	}
}

// A held-back leaf is served anyway once the leaf it replaces comes within the
// margin of its expiry, and the replica says so.
func TestServerTrustGuardServesTheHeldLeafWithinTheMarginOfExpiry(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA old"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA new"))
	oldLeaf, newLeaf := oldCA.MustIssue(), newCA.MustIssue()
	clock := newFakeClock(oldLeaf.Cert.NotAfter.Add(-2 * time.Hour))
	r := startReplica(t, "cp-0", oldLeaf, serverGuard(time.Hour, clock.now))
	agents := startAgents(t, 4, []*replica{r}, newCAVolume(t, oldCA))

	loadAndWaitHeld(t, []*replica{r}, newLeaf)
	requireServing(t, r, oldLeaf, "two hours before the old leaf expires")

	clock.set(oldLeaf.Cert.NotAfter.Add(-30 * time.Minute))
	testutil.WaitFor(t, "the held leaf to be served within the margin", func() bool {
		return r.srv.Serving().Current().LeafFingerprint() == hotcert.FingerprintOf(newLeaf.Cert)
	})
	testutil.WaitFor(t, "the release to be logged", func() bool {
		return r.logs.Count("server certificate released: the previous leaf is within the margin of its expiry, although connected agents do not trust the new issuer") == 1
	})
	for _, a := range agents {
		if !a.Stats().Connected {
			t.Fatalf("%s dropped although connections keep their certificate", a.ID())
		}
	}
}

// The agent keeps a removed CA for at most its maximum, judged by its clock: after
// that it drops it, and reconnects to a replica still serving the old leaf fail.
func TestAgentTrustGuardKeepsARemovedCAForAtMostItsMaximum(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA old"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA new"))
	r := startReplica(t, "cp-0", oldCA.MustIssue())
	replicas := []*replica{r}
	vol := newCAVolume(t, oldCA)
	clock := newFakeClock(time.Now())
	var events eventLog
	agents := startAgents(t, 4, replicas, vol, events.record, agentGuard(time.Hour, clock.now))

	vol.set(t, hotcerttest.BundlePEM(newCA))
	reconnectAll(t, replicas, agents)
	requireNoFailures(t, "old CA kept", replicas, agents)
	for _, a := range agents {
		if _, ok := a.KeptCA(); !ok {
			t.Fatalf("%s does not keep the old CA", a.ID())
		}
	}

	clock.set(clock.now().Add(time.Hour))
	requireFailFast(t, replicas, agents, &events, "maximum reached")
	requireNothingKept(t, agents, "agent trust guard stopped keeping a CA removed from its bundle: the maximum was reached")
}

// requireNothingKept fails if an agent keeps a CA beyond its bundle, or did not log
// why once.
func requireNothingKept(t *testing.T, agents []*testAgent, line string) {
	t.Helper()
	for _, a := range agents {
		if _, ok := a.KeptCA(); ok {
			t.Errorf("%s keeps a CA beyond its bundle", a.ID())
		}
		if n := a.logs.Count(line); n != 1 {
			t.Errorf("%s logged %q %d times, want once:\n%s", a.ID(), line, n, a.logs)
		}
	}
}

// A CA listed as revoked is never kept: the one-step swap fails as without the guard.
func TestAgentTrustGuardNeverKeepsARevokedCA(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA old"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA new"))
	r := startReplica(t, "cp-0", oldCA.MustIssue())
	replicas := []*replica{r}
	vol := newCAVolume(t, oldCA)
	var events eventLog
	agents := startAgents(t, 4, replicas, vol, events.record, agentGuard(time.Hour, time.Now, hotcert.FingerprintOf(oldCA.Cert)))

	vol.set(t, hotcerttest.BundlePEM(newCA))
	requireFailFast(t, replicas, agents, &events, "revoked CA removed")
	requireNothingKept(t, agents, "agent trust guard does not keep a revoked CA removed from its bundle, although the control plane serves a leaf it issued")
}
