package rotation_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

const nAgents = 20

// stragglers returns the stragglers' names, in report order.
func stragglers(rep *rotation.Report) []string {
	var out []string
	for _, s := range rep.Stragglers {
		out = append(out, s.Kind+" "+s.Name)
	}
	return out
}

func requireNoFailures(t *testing.T, agents []*agent.Agent) {
	t.Helper()
	for _, a := range agents {
		if st := a.Stats(); st.ConnectFailures+st.HandshakeFailures != 0 {
			t.Fatalf("%s: connect failures %v, handshake failures %v", a.ID(), st.ConnectFailuresByReason, st.HandshakeFailuresByReason)
		}
	}
}

// TestRotationStatusStepByStep runs a three-step CA rotation over two replicas and
// twenty-two agents (twenty on a shared bundle volume, one on a volume of its own
// that lags, one of an older release that reports nothing) and checks each step's
// verdict right before and after the step, with the stragglers named.
func TestRotationStatusStepByStep(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	oldLeaf, newLeaf := oldCA.MustIssue(), newCA.MustIssue()
	clk := newClock()
	replicas := []*replica{startReplica(t, "cp-0", oldLeaf, clk.use), startReplica(t, "cp-1", oldLeaf, clk.use)}
	fleetVol := newVolume(t, "ca.crt", hotcerttest.BundlePEM(oldCA))
	lagVol := newVolume(t, "ca.crt", hotcerttest.BundlePEM(oldCA))
	agents := append(startAgents(t, "agent", nAgents, replicas, fleetVol), startAgents(t, "lagging", 1, replicas[1:], lagVol)...)
	stopLegacy := startLegacyAgent(t, replicas[0], "legacy-0", oldCA)
	o := options(t, replicas, oldCA, newCA)

	// Before step 1: nobody trusts CA-2026; switching the leaf would break everyone.
	rep := check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, false)
	requireStep(t, rep, rotation.StepSwitchServerCert, false, false)
	requireStep(t, rep, rotation.StepRemoveOldCA, false, false)
	if rep.Next != rotation.StepAddNewCA || rep.Agents.Total != nAgents+2 || rep.Agents.TrustNew != 0 || rep.Agents.TrustOld != nAgents+1 || rep.Agents.Unknown != 1 ||
		len(rep.Stragglers) != nAgents+2 {
		t.Fatalf("before step 1: next %q agents %+v stragglers %v", rep.Next, rep.Agents, stragglers(rep))
	}
	for _, r := range rep.Replicas {
		if r.Serves == nil || !r.Serves.IssuedByOld || r.Serves.IssuedByNew || !r.Serves.HostnameOK {
			t.Fatalf("before step 1: replica %s serves %+v (%s)", r.Name, r.Serves, r.ServeError)
		}
	}

	// Step 1 on the shared volume: two stragglers remain, named.
	fleetVol.set(t, hotcerttest.BundlePEM(newCA, oldCA))
	testutil.WaitFor(t, "the fleet to report CA-2026", func() bool { return trusting(replicas, newCA) == nAgents })
	rep = check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, false)
	requireStep(t, rep, rotation.StepSwitchServerCert, false, false)
	if got := strings.Join(stragglers(rep), ", "); got != "agent lagging-00, agent legacy-0" {
		t.Fatalf("step 1 stragglers: %s", got)
	}
	st, _ := rep.Step(rotation.StepSwitchServerCert)
	for _, want := range []string{"20/22 connected agents trust CA-2026 (reported by 2 of 2 replicas)", "agent lagging-00 (on cp-1): its bundle lacks CA-2026",
		"agent legacy-0 (on cp-0): reports nothing about its trust: unknown, reads its CA bundle only at start"} {
		if !strings.Contains(rep.Summary+" | "+st.Why, want) {
			t.Fatalf("step 1 verdict lacks %q:\nsummary: %s\nswitch: %s", want, rep.Summary, st.Why)
		}
	}

	var text strings.Builder
	if err := rotation.WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{rep.Summary + "\n", "stragglers (add-new-ca):",
		// Each count says what it counts: agents that report nothing, and agents that
		// report a bundle they read only at start, are two counts with two names.
		"22 connected: 20 trust CA-2026, 21 trust CA-2025, 1 report nothing (an older release, reads its bundle only at start), 0 report a bundle they read only at start; 0 departed, not back yet\n", "agent lagging-00 (on cp-1):  its bundle lacks CA-2026", "agent legacy-0 (on cp-0):"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text report lacks %q:\n%s", want, text.String())
		}
	}

	// The laggard's volume catches up and the old-release agent is stopped: it departed
	// and is not back, so nothing proves its next connection trusts CA-2026 …
	lagVol.set(t, hotcerttest.BundlePEM(newCA, oldCA))
	stopLegacy()
	testutil.WaitFor(t, "every agent to report CA-2026", func() bool { return trusting(replicas, newCA) == nAgents+1 })
	rep = check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, false)
	requireStep(t, rep, rotation.StepSwitchServerCert, false, false)
	if len(rep.Stragglers) != 1 || rep.Stragglers[0].Name != "legacy-0" || !strings.HasPrefix(rep.Stragglers[0].Reason, "departed, not back yet") ||
		rep.Stragglers[0].LastSeen == nil || rep.Agents.Departed != 1 || rep.Agents.Total != nAgents+1 {
		t.Fatalf("a departed agent: stragglers %+v, agents %+v", rep.Stragglers, rep.Agents)
	}
	// … until the replicas have remembered it for their declared time: then it is
	// no longer required, and step 1 is done.
	clk.advance(controlplane.DefaultFleetRemember)
	rep = check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, true)
	requireStep(t, rep, rotation.StepSwitchServerCert, true, false)
	requireStep(t, rep, rotation.StepRemoveOldCA, false, false)
	if want := "step 1 done: 21/21 connected agents trust CA-2026 (reported by 2 of 2 replicas); safe to switch the server certificate"; rep.Summary != want {
		t.Fatalf("after step 1: %q, want %q", rep.Summary, want)
	}
	// Expecting one agent more than report: not done, and it says why.
	few := o
	few.MinAgents = nAgents + 2
	rep = check(t, few)
	requireStep(t, rep, rotation.StepAddNewCA, true, false)
	requireStep(t, rep, rotation.StepSwitchServerCert, false, false)
	if st, _ := rep.Step(rotation.StepSwitchServerCert); !strings.Contains(st.Why, fmt.Sprintf("fewer agents report than the %d expected", nAgents+2)) {
		t.Fatalf("with --min-agents %d: %s", nAgents+2, st.Why)
	}

	// Step 2 half-way: cp-0 switched, cp-1 still serves the old leaf.
	replicas[0].serve(t, newLeaf)
	rep = check(t, o)
	requireStep(t, rep, rotation.StepSwitchServerCert, true, false)
	requireStep(t, rep, rotation.StepRemoveOldCA, false, false)
	st, _ = rep.Step(rotation.StepRemoveOldCA)
	if !strings.HasPrefix(st.Why, "not safe to remove CA-2025: replica cp-1 still serves a leaf issued by CA-2025") ||
		strings.Join(stragglers(rep), ", ") != "replica cp-1" || rep.Next != rotation.StepSwitchServerCert {
		t.Fatalf("step 2 half-way: remove-old-ca %q, stragglers %v, next %q", st.Why, stragglers(rep), rep.Next)
	}

	// A leaf of the new CA that does not name the server name does not count.
	replicas[1].serve(t, newCA.MustIssue(hotcerttest.WithDNSNames("cp.example.com"), hotcerttest.WithIPAddresses()))
	rep = check(t, o)
	requireStep(t, rep, rotation.StepSwitchServerCert, true, false)
	if st, _ := rep.Step(rotation.StepSwitchServerCert); !strings.Contains(st.Why, "replica cp-1 serves a leaf issued by CA-2026 that does not name the server name") {
		t.Fatalf("a leaf with the wrong name: %s", st.Why)
	}

	// Step 2 done: removing CA-2025 is safe; every agent still holding it is named.
	replicas[1].serve(t, newLeaf)
	rep = check(t, o)
	requireStep(t, rep, rotation.StepSwitchServerCert, true, true)
	requireStep(t, rep, rotation.StepRemoveOldCA, true, false)
	if rep.Next != rotation.StepRemoveOldCA || len(rep.Stragglers) != nAgents+1 ||
		!strings.HasPrefix(rep.Summary, "step 2 done: 2/2 replicas serve a leaf issued by CA-2026") || !strings.HasSuffix(rep.Summary, "safe to remove CA-2025") {
		t.Fatalf("after step 2: next %q summary %q stragglers %d", rep.Next, rep.Summary, len(rep.Stragglers))
	}

	// Step 3: the bundles drop CA-2025, and the rotation is complete.
	fleetVol.set(t, hotcerttest.BundlePEM(newCA))
	lagVol.set(t, hotcerttest.BundlePEM(newCA))
	testutil.WaitFor(t, "no agent to report CA-2025", func() bool { return trusting(replicas, oldCA) == 0 })
	rep = check(t, o)
	for _, s := range rotation.Steps() {
		requireStep(t, rep, s, true, true)
	}
	if rep.Next != "" || len(rep.Stragglers) != 0 || !strings.HasPrefix(rep.Summary, "rotation complete") {
		t.Fatalf("after step 3: next %q summary %q stragglers %v", rep.Next, rep.Summary, stragglers(rep))
	}
	requireNoFailures(t, agents)
}

// TestRotationStatusNamesAnUnreachableReplica: a replica that cannot be reached
// holds every step back, and is named.
func TestRotationStatusNamesAnUnreachableReplica(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	replicas := []*replica{startReplica(t, "cp-0", newCA.MustIssue())}
	startAgents(t, "agent", 2, replicas, newVolume(t, "ca.crt", hotcerttest.BundlePEM(newCA, oldCA)))
	o := options(t, replicas, oldCA, newCA)
	o.Timeout = 2 * time.Second
	o.Replicas = append(o.Replicas, rotation.Replica{Address: "127.0.0.1:1", StatusURL: "http://127.0.0.1:1/healthz"})
	rep := check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, false)
	requireStep(t, rep, rotation.StepRemoveOldCA, false, false)
	if got := strings.Join(stragglers(rep), ", "); got != "replica 127.0.0.1:1" || !strings.Contains(rep.Summary, "2/2 connected agents trust CA-2026 (reported by 1 of 2 replicas)") ||
		rep.Replicas[1].ServeError == "" || rep.Replicas[1].StatusError == "" {
		t.Fatalf("unreachable replica: stragglers %s, summary %q, %+v", got, rep.Summary, rep.Replicas[1])
	}
}

// TestWaitReturnsAsSoonAsTheStepIsSafe: Wait looks again every interval, and returns
// with the first report in which the step is safe — the one right after the change
// that made it safe — or gives up naming the stragglers.
func TestWaitReturnsAsSoonAsTheStepIsSafe(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	replicas := []*replica{startReplica(t, "cp-0", oldCA.MustIssue()), startReplica(t, "cp-1", oldCA.MustIssue())}
	vol := newVolume(t, "ca.crt", hotcerttest.BundlePEM(oldCA))
	startAgents(t, "agent", nAgents, replicas, vol)
	o := options(t, replicas, oldCA, newCA)

	// Not safe within the timeout: an error naming the step and a straggler.
	rep, err := rotation.Wait(context.Background(), o, rotation.WaitOptions{Step: rotation.StepSwitchServerCert, Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond})
	if !errors.Is(err, rotation.ErrNotSafe) || rep == nil || !strings.Contains(err.Error(), "switch-server-cert") || !strings.Contains(err.Error(), "its bundle lacks CA-2026") {
		t.Fatalf("Wait before step 1: %v", err)
	}

	// The step becomes safe while the third report is being looked at: Wait must
	// return with the fourth, the first that can see the change.
	reports := 0
	rep, err = rotation.Wait(context.Background(), o, rotation.WaitOptions{
		Step: rotation.StepSwitchServerCert, Timeout: time.Minute, Interval: 10 * time.Millisecond,
		OnReport: func(r *rotation.Report) {
			reports++
			if st, _ := r.Step(rotation.StepSwitchServerCert); st.Safe {
				return
			}
			if reports == 3 {
				vol.set(t, hotcerttest.BundlePEM(newCA, oldCA))
				testutil.WaitFor(t, "the fleet to report CA-2026", func() bool { return trusting(replicas, newCA) == nAgents })
			}
		},
	})
	if err != nil || reports != 4 {
		t.Fatalf("Wait: %d reports, %v; want 4 and no error", reports, err)
	}
	if st, _ := rep.Step(rotation.StepSwitchServerCert); !st.Safe {
		t.Fatalf("Wait returned an unsafe report: %+v", st)
	}
	if _, err := rotation.Wait(context.Background(), o, rotation.WaitOptions{Step: "switch"}); err == nil || !strings.Contains(err.Error(), "add-new-ca, switch-server-cert, remove-old-ca") {
		t.Fatalf("an unknown step: %v", err)
	}
}
