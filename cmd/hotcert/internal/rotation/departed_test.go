package rotation_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// TestRotationStatusDoesNotProveAnEmptiedFleet: with every agent away (their streams
// closed: reconnecting after a drain, restarting) the fleet is not 0/0 done — each
// departed agent is named and holds step 1 back until it is back, or until the
// replica has remembered it for its declared time.
func TestRotationStatusDoesNotProveAnEmptiedFleet(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	clk := newClock()
	replicas := []*replica{startReplica(t, "cp-0", oldCA.MustIssue(), clk.use)}
	vol := newVolume(t, "ca.crt", hotcerttest.BundlePEM(newCA, oldCA))
	_, stops := startStoppableAgents(t, "agent", 3, replicas, vol)
	o := options(t, replicas, oldCA, newCA)
	o.MinAgents = 1
	testutil.WaitFor(t, "the fleet to report CA-2026", func() bool { return trusting(replicas, newCA) == 3 })
	requireStep(t, check(t, o), rotation.StepAddNewCA, true, true)

	// Every agent away.
	for _, stop := range stops {
		stop()
	}
	testutil.WaitFor(t, "cp-0 to let the agents go", func() bool { return replicas[0].srv.Fleet().Agents == 0 })
	rep := check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, false)
	requireStep(t, rep, rotation.StepSwitchServerCert, false, false)
	if got := strings.Join(stragglers(rep), ", "); got != "agent agent-00, agent agent-01, agent agent-02" || rep.Agents.Departed != 3 || rep.Agents.Total != 0 ||
		rep.Replicas[0].Departed != 3 || !strings.HasPrefix(rep.Summary, "step 1 (add-new-ca) not done: 0/0 connected agents trust CA-2026, 3 departed agents not back yet (reported by 1 of 1 replica): agent agent-00 (on cp-0): departed, not back yet") {
		t.Fatalf("every agent away: stragglers %s, agents %+v, summary %q", got, rep.Agents, rep.Summary)
	}
	_, err := rotation.Wait(context.Background(), o, rotation.WaitOptions{Step: rotation.StepSwitchServerCert, Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond})
	if !errors.Is(err, rotation.ErrNotSafe) || !strings.Contains(err.Error(), "agent agent-00 (on cp-0): departed, not back yet") {
		t.Fatalf("--wait switch-server-cert with every agent away: %v", err)
	}

	// One comes back (its id registers again): it is no longer departed.
	startAgents(t, "agent", 1, replicas, vol)
	testutil.WaitFor(t, "agent-00 to report CA-2026", func() bool { return trusting(replicas, newCA) == 1 })
	rep = check(t, o)
	if got := strings.Join(stragglers(rep), ", "); got != "agent agent-01, agent agent-02" || rep.Agents.Departed != 2 || rep.Agents.Total != 1 {
		t.Fatalf("one back: stragglers %s, agents %+v", got, rep.Agents)
	}

	// The others stay away longer than the replica remembers them: no longer
	// required. The agent that came back proves step 1.
	clk.advance(controlplane.DefaultFleetRemember)
	rep = check(t, o)
	requireStep(t, rep, rotation.StepAddNewCA, true, true)
	if rep.Agents.Departed != 0 || rep.Summary != "step 1 done: 1/1 connected agents trust CA-2026 (reported by 1 of 1 replica); safe to switch the server certificate" {
		t.Fatalf("departed agents forgotten: agents %+v, summary %q", rep.Agents, rep.Summary)
	}
}

// TestRotationStatusNamesWhatStep3WaitsFor: when fewer agents report than
// --min-agents, every step that is not safe says so — step 3 too, whose reason was
// once empty ("not safe to remove CA-2025: ").
func TestRotationStatusNamesWhatStep3WaitsFor(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	replicas := []*replica{startReplica(t, "cp-0", newCA.MustIssue()), startReplica(t, "cp-1", newCA.MustIssue())}
	startAgents(t, "agent", 2, replicas, newVolume(t, "ca.crt", hotcerttest.BundlePEM(newCA)))
	o := options(t, replicas, oldCA, newCA)
	testutil.WaitFor(t, "the fleet to report CA-2026", func() bool { return trusting(replicas, newCA) == 2 })
	o.MinAgents = 3
	rep, err := rotation.Wait(context.Background(), o, rotation.WaitOptions{Step: rotation.StepRemoveOldCA, Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond})
	const want = "not safe to remove CA-2025: fewer agents report than the 3 expected (2 connected;"
	if !errors.Is(err, rotation.ErrNotSafe) || !strings.Contains(err.Error(), "remove-old-ca step not safe after 100ms: "+want) {
		t.Fatalf("--wait remove-old-ca below --min-agents: %v", err)
	}
	requireReasons(t, rep)
	if st, _ := rep.Step(rotation.StepRemoveOldCA); !strings.HasPrefix(st.Why, want) {
		t.Fatalf("remove-old-ca: %q, want it to start with %q", st.Why, want)
	}
	// Below the floor and a replica on the old leaf: both are named.
	replicas[1].serve(t, oldCA.MustIssue())
	rep = check(t, o)
	if st, _ := rep.Step(rotation.StepRemoveOldCA); !strings.Contains(st.Why, want) || !strings.Contains(st.Why, "; replica cp-1 still serves a leaf issued by CA-2025") {
		t.Fatalf("remove-old-ca: %q", st.Why)
	}
}

// TestWaitComplete: --wait complete blocks until every step is done, and gives up
// naming what the next step waits for.
func TestWaitComplete(t *testing.T) {
	oldCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	newCA := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	replicas := []*replica{startReplica(t, "cp-0", newCA.MustIssue())}
	vol := newVolume(t, "ca.crt", hotcerttest.BundlePEM(newCA, oldCA))
	startAgents(t, "agent", 2, replicas, vol)
	o := options(t, replicas, oldCA, newCA)
	o.MinAgents = 2
	testutil.WaitFor(t, "the fleet to report CA-2026", func() bool { return trusting(replicas, newCA) == 2 })

	rep, err := rotation.Wait(context.Background(), o, rotation.WaitOptions{Step: rotation.WaitComplete, Timeout: 100 * time.Millisecond, Interval: 10 * time.Millisecond})
	if !errors.Is(err, rotation.ErrNotComplete) || rep == nil || rep.Next != rotation.StepRemoveOldCA ||
		!strings.Contains(err.Error(), "rotation not complete after 100ms: step remove-old-ca not done: 2/2 connected agents still trust CA-2025: agent agent-00 (on cp-0): its bundle still holds CA-2025") {
		t.Fatalf("--wait complete before step 3: %v", err)
	}
	requireReasons(t, rep)

	// Step 3 happens while Wait looks: it returns with the complete rotation.
	reports := 0
	rep, err = rotation.Wait(context.Background(), o, rotation.WaitOptions{Step: rotation.WaitComplete, Timeout: time.Minute, Interval: 10 * time.Millisecond,
		OnReport: func(r *rotation.Report) {
			if reports++; reports == 2 {
				vol.set(t, hotcerttest.BundlePEM(newCA))
			}
		}})
	if err != nil || rep.Next != "" || !strings.HasPrefix(rep.Summary, "rotation complete") || reports < 3 {
		t.Fatalf("--wait complete: %d reports, %v, %+v", reports, err, rep)
	}
}
