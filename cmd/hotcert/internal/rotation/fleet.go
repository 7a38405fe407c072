package rotation

import (
	"slices"
	"strings"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// fleetAgent is one agent of the merged fleet view, with the replica it is on (or
// was last seen on). A departed agent is one whose stream closed and that has not
// come back to any replica: nothing proves what its next connection trusts.
type fleetAgent struct {
	agentrpc.FleetAgent
	replica string
	address string // the replica's address: its name is unknown while its status cannot be read

	departed bool
	lastSeen time.Time // when its stream closed (departed only)
	forgetAt time.Time // when it stops counting (departed only)
	// remembered: no replica lists it any more (a replica restarted, or forgot
	// it); this command remembers it from an earlier look (--wait).
	remembered bool
}

// mergeFleets returns the agents of every replica that reports, by id: an agent
// seen on two replicas (it moved while they were read) counts once, with its
// newest report; an agent connected to one replica and listed as departed by
// another is connected (it is back); an agent departed from two replicas counts
// once, with its latest departure.
func mergeFleets(replicas []ReplicaReport) []fleetAgent {
	byID := map[string]fleetAgent{}
	for _, r := range replicas {
		if r.fleet == nil {
			continue
		}
		for _, a := range r.fleet.AgentList {
			if prev, ok := byID[a.ID]; ok && !prev.departed && reportedAt(prev.FleetAgent).After(reportedAt(a)) {
				continue
			}
			byID[a.ID] = fleetAgent{FleetAgent: a, replica: r.Name, address: r.Address}
		}
	}
	for _, r := range replicas {
		if r.fleet == nil {
			continue
		}
		for _, d := range r.fleet.DepartedList {
			if prev, ok := byID[d.ID]; ok && (!prev.departed || prev.lastSeen.After(d.LastSeen)) {
				continue
			}
			byID[d.ID] = fleetAgent{FleetAgent: d.FleetAgent, replica: r.Name, address: r.Address, departed: true, lastSeen: d.LastSeen, forgetAt: d.ForgetAt}
		}
	}
	return sortedAgents(byID)
}

func sortedAgents(byID map[string]fleetAgent) []fleetAgent {
	out := make([]fleetAgent, 0, len(byID))
	for _, a := range byID {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b fleetAgent) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func reportedAt(a agentrpc.FleetAgent) time.Time {
	if a.ReportedAt == nil {
		return time.Time{}
	}
	return *a.ReportedAt
}

// memory is what Wait remembers of the agents across its looks, so an agent that
// vanishes from every fleet view (its replica restarted and lost its own memory of
// departed agents) still counts as departed, for as long as the replicas declare
// they keep departed agents (their fleet views' departed_remember_seconds).
type memory struct {
	seen map[string]fleetAgent // by id: the agent as last seen, with forgetAt set
	keep time.Duration         // the longest time a replica declared it keeps departed agents
}

func newMemory() *memory { return &memory{seen: map[string]fleetAgent{}} }

// recall adds to agents the remembered ones that no replica lists now and that are
// still within their time, as departed; an agent whose replica's fleet view could
// not be read this time is left out (the unread replica holds every step back, named).
// It returns the merged list, sorted by id.
func (m *memory) recall(agents []fleetAgent, replicas []ReplicaReport, now time.Time) []fleetAgent {
	if m == nil || len(m.seen) == 0 {
		return agents
	}
	byID := make(map[string]fleetAgent, len(agents))
	for _, a := range agents {
		byID[a.ID] = a
	}
	unread := map[string]bool{}
	for _, r := range replicas {
		if r.fleet == nil {
			unread[r.Address] = true
		}
	}
	for id, a := range m.seen {
		if _, listed := byID[id]; listed || unread[a.address] || !now.Before(a.forgetAt) {
			continue
		}
		a.departed, a.remembered = true, true
		byID[id] = a
	}
	return sortedAgents(byID)
}

// note remembers agents as seen at now: a connected agent until now plus the
// longest time the replicas keep departed agents, a departed one until the replica
// forgets it. An agent past its time is forgotten.
func (m *memory) note(agents []fleetAgent, replicas []ReplicaReport, now time.Time) {
	if m == nil {
		return
	}
	unread := map[string]bool{}
	for _, r := range replicas {
		if r.fleet == nil {
			unread[r.Address] = true
			continue
		}
		m.keep = max(m.keep, time.Duration(r.fleet.RememberSeconds*float64(time.Second)))
	}
	for _, a := range agents {
		if !a.departed {
			a.lastSeen, a.forgetAt = now, now.Add(m.keep)
		}
		m.seen[a.ID] = a
	}
	for id, a := range m.seen {
		switch {
		case unread[a.address]:
			// Its replica cannot be read: nothing says it is gone, so its time
			// counts from now (the unread replica holds every step back meanwhile).
			a.forgetAt = later(a.forgetAt, now.Add(m.keep))
			m.seen[id] = a
		case !now.Before(a.forgetAt):
			delete(m.seen, id)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// departedReason says why a departed agent holds step 1 back.
func departedReason(a fleetAgent) string {
	at, until := a.lastSeen.UTC().Format(time.RFC3339), a.forgetAt.UTC().Format(time.RFC3339)
	if a.remembered {
		return "departed, not back yet (last listed at " + at + ", no replica lists it now; counted until " + until + " unless it reconnects)"
	}
	return "departed, not back yet (its stream closed at " + at + "; counted until " + until + " unless it reconnects)"
}
