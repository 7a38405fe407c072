package controlplane_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// startLeaver runs a reference agent with id on r; the returned function stops it
// (its stream closes: it departs) and waits until it has.
func startLeaver(t *testing.T, r *replica, id string, ca *caVolume) (stop func()) {
	t.Helper()
	a, err := agent.New(agent.Config{ID: id, Server: r.addr, ServerName: "localhost", CAFile: ca.path(),
		HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 10 * time.Second, ConnectTimeout: 10 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ReconnectJitter: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	testutil.WaitFor(t, id+" to report", func() bool {
		return slices.ContainsFunc(r.srv.Fleet().AgentList, func(a agentrpc.FleetAgent) bool { return a.ID == id && a.ReportedAt != nil })
	})
	return stop
}

// TestFleetViewKeepsDepartedAgents: an agent whose stream closed stays in the fleet
// view as departed — when it was last seen, what it last trusted, until when it is
// kept — apart from the connected counts, until it registers again or the replica's
// declared time has passed; /healthz carries it. A negative FleetRemember keeps none.
func TestFleetViewKeepsDepartedAgents(t *testing.T) {
	ca := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	fp := hotcert.FingerprintOf(ca.Cert).String()
	clock := newFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	r := startReplica(t, "cp-0", ca.MustIssue(), func(c *controlplane.Config) { c.Clock = clock.now })
	vol := newCAVolume(t, ca)
	startAgents(t, 1, []*replica{r}, vol)
	startLeaver(t, r, "leaver", vol)()

	testutil.WaitFor(t, "leaver to depart", func() bool { return r.srv.Fleet().Departed == 1 })
	f := r.srv.Fleet()
	d := f.DepartedList[0]
	if d.ID != "leaver" || !slices.Equal(d.CAs, []string{fp}) || d.ReportedAt == nil || !d.LastSeen.Equal(clock.now()) ||
		!d.ForgetAt.Equal(clock.now().Add(controlplane.DefaultFleetRemember)) {
		t.Fatalf("departed agent: %+v", d)
	}
	if f.Agents != 1 || f.RememberSeconds != controlplane.DefaultFleetRemember.Seconds() || len(f.CAs) != 1 || f.CAs[0].Agents != 1 || f.ByTrustReading["per_connect"] != 1 {
		t.Fatalf("a departed agent is not counted as connected: %+v", f)
	}
	rec := httptest.NewRecorder()
	r.srv.HealthHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	var st struct {
		Fleet struct {
			Departed        int     `json:"departed"`
			RememberSeconds float64 `json:"departed_remember_seconds"`
			DepartedList    []struct {
				ID       string    `json:"id"`
				CAs      []string  `json:"cas"`
				LastSeen time.Time `json:"last_seen"`
				ForgetAt time.Time `json:"forget_at"`
			} `json:"departed_list"`
		} `json:"fleet"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || st.Fleet.Departed != 1 || st.Fleet.RememberSeconds != 60 ||
		len(st.Fleet.DepartedList) != 1 || st.Fleet.DepartedList[0].ID != "leaver" || st.Fleet.DepartedList[0].ForgetAt.IsZero() {
		t.Fatalf("/healthz fleet: %v %+v", err, st.Fleet)
	}

	// Back: it registers again and is no longer departed.
	stop := startLeaver(t, r, "leaver", vol)
	if f := r.srv.Fleet(); f.Departed != 0 || f.Agents != 2 {
		t.Fatalf("back: %+v", f)
	}
	// Gone again, for longer than the replica keeps it: forgotten.
	stop()
	testutil.WaitFor(t, "leaver to depart again", func() bool { return r.srv.Fleet().Departed == 1 })
	clock.set(clock.now().Add(controlplane.DefaultFleetRemember))
	if f := r.srv.Fleet(); f.Departed != 0 || len(f.DepartedList) != 0 {
		t.Fatalf("past the declared time: %+v", f.DepartedList)
	}

	// FleetRemember negative: departed agents are forgotten at once.
	forgetful := startReplica(t, "cp-1", ca.MustIssue(), func(c *controlplane.Config) { c.FleetRemember = -1 })
	startLeaver(t, forgetful, "leaver", vol)()
	testutil.WaitFor(t, "cp-1 to let leaver go", func() bool { return forgetful.srv.Fleet().Agents == 0 })
	if f := forgetful.srv.Fleet(); f.Departed != 0 || f.RememberSeconds != 0 {
		t.Fatalf("FleetRemember < 0: %+v", f)
	}
}

// TestServerTrustGuardCountsDepartedAgents: the trust guard reads the server's memory
// of departed agents within its own window (TrustGuardRemember): a fleet emptied for
// a moment does not release a leaf its agents cannot verify, and once the window has
// passed the departed agent no longer holds it back.
func TestServerTrustGuardCountsDepartedAgents(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA old"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("guard CA new"))
	oldLeaf, newLeaf := oldCA.MustIssue(), newCA.MustIssue()
	clock := newFakeClock(time.Now())
	r := startReplica(t, "cp-0", oldLeaf, serverGuard(time.Hour, clock.now))
	startLeaver(t, r, "leaver", newCAVolume(t, oldCA))()
	testutil.WaitFor(t, "leaver to depart", func() bool { return r.srv.Fleet().Departed == 1 })

	loadAndWaitHeld(t, []*replica{r}, newLeaf)
	requireServing(t, r, oldLeaf, "no agent connected, one departed that lacks the issuer")
	if n := metricValue(t, r.reg, "hotcert_controlplane_trust_guard_agents_lacking_issuer", nil); n != 1 {
		t.Fatalf("%v agents lacking the issuer, want the departed one", n)
	}
	clock.set(clock.now().Add(controlplane.DefaultTrustGuardRemember))
	testutil.WaitFor(t, "the guard to forget the departed agent and serve the new leaf", func() bool {
		return r.srv.Serving().Current().LeafFingerprint() == hotcert.FingerprintOf(newLeaf.Cert)
	})
}
