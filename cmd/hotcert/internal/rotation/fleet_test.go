package rotation

import (
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// TestWaitRemembersAgentsARestartedReplicaForgot: between looks, Wait remembers the
// agents it saw. A replica that restarted lists neither its agents nor its departed
// ones; an agent it lost is departed, not proven, for as long as the replicas
// declare they keep departed agents, then forgotten. An agent of a replica that
// cannot be read is not forgotten meanwhile.
func TestWaitRemembersAgentsARestartedReplicaForgot(t *testing.T) {
	oldCAs := cas{name: "CA-2025", fps: map[string]bool{"00aa": true}}
	newCAs := cas{name: "CA-2026", fps: map[string]bool{"00bb": true}}
	agent := func(id string) agentrpc.FleetAgent {
		return agentrpc.FleetAgent{ID: id, TrustReading: agentrpc.TrustPerConnect, CAs: []string{"00aa", "00bb"}}
	}
	report := func(at time.Time, agents ...agentrpc.FleetAgent) *Report {
		return &Report{CheckedAt: at, Replicas: []ReplicaReport{{Name: "cp-0", Address: "10.0.0.7:9091", Agents: len(agents),
			fleet: &agentrpc.Fleet{Agents: len(agents), AgentList: agents, RememberSeconds: 60}}}}
	}
	addDone := func(rep *Report) bool { st, _ := rep.Step(StepAddNewCA); return st.Done }
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	mem := newMemory()

	rep := report(t0, agent("a-0"), agent("a-1"))
	judge(rep, oldCAs, newCAs, 1, mem)
	if !addDone(rep) {
		t.Fatalf("both agents trust CA-2026: %s", rep.Summary)
	}

	// cp-0 restarted: it lists a-1 only, and knows nothing of a-0.
	rep = report(t0.Add(2*time.Second), agent("a-1"))
	judge(rep, oldCAs, newCAs, 1, mem)
	if addDone(rep) || len(rep.Stragglers) != 1 || rep.Stragglers[0].Name != "a-0" || rep.Agents.Departed != 1 ||
		!strings.Contains(rep.Stragglers[0].Reason, "departed, not back yet (last listed at 2026-12-02T00:00:00Z, no replica lists it now; counted until 2026-12-02T00:01:00Z unless it reconnects)") {
		t.Fatalf("an agent the restarted replica forgot: %s %+v", rep.Summary, rep.Stragglers)
	}
	// One look alone cannot know: the shrunken fleet reads as done (--min-agents
	// is the floor there).
	once := report(t0.Add(2*time.Second), agent("a-1"))
	judge(once, oldCAs, newCAs, 1, nil)
	if !addDone(once) {
		t.Fatalf("one look: %s", once.Summary)
	}

	// The replica cannot be read for a while: a-0's time counts from then.
	unread := &Report{CheckedAt: t0.Add(50 * time.Second), Replicas: []ReplicaReport{{Name: "10.0.0.7:9091", Address: "10.0.0.7:9091", StatusError: "status: connection refused"}}}
	judge(unread, oldCAs, newCAs, 1, mem)
	rep = report(t0.Add(70*time.Second), agent("a-1"))
	judge(rep, oldCAs, newCAs, 1, mem)
	if addDone(rep) || rep.Agents.Departed != 1 {
		t.Fatalf("a-0 forgotten while its replica could not be read: %s", rep.Summary)
	}
	// Past the declared time: forgotten, no longer required.
	rep = report(t0.Add(111*time.Second), agent("a-1"))
	judge(rep, oldCAs, newCAs, 1, mem)
	if !addDone(rep) || rep.Agents.Departed != 0 {
		t.Fatalf("a-0 past its time: %s", rep.Summary)
	}
}
