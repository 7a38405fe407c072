package rotation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// fleetAgent is one agent of the merged fleet view, with the replica it is on.
type fleetAgent struct {
	agentrpc.FleetAgent
	replica string
}

// mergeFleets returns the agents of every replica that reports, by id: an agent
// seen on two replicas (it moved while they were read) counts once, with its
// newest report.
func mergeFleets(replicas []ReplicaReport) []fleetAgent {
	byID := map[string]fleetAgent{}
	for _, r := range replicas {
		if r.fleet == nil {
			continue
		}
		for _, a := range r.fleet.AgentList {
			if prev, ok := byID[a.ID]; ok && reportedAt(prev.FleetAgent).After(reportedAt(a)) {
				continue
			}
			byID[a.ID] = fleetAgent{FleetAgent: a, replica: r.Name}
		}
	}
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

func trustsAny(a fleetAgent, side cas) bool {
	return slices.ContainsFunc(a.CAs, func(fp string) bool { return side.fps[fp] })
}

// judge fills in the counts, the verdict on each step, the stragglers and the summary.
func judge(rep *Report, oldCAs, newCAs cas, minAgents int) {
	agents := mergeFleets(rep.Replicas)
	var reporting []string
	var replicaIssues []Straggler // replicas whose fleet view is missing: every step waits on them
	for _, r := range rep.Replicas {
		if r.fleet != nil {
			reporting = append(reporting, r.Name)
			continue
		}
		replicaIssues = append(replicaIssues, Straggler{Kind: "replica", Name: r.Name, Step: StepAddNewCA,
			Reason: "does not report its agents' trust: " + r.StatusError})
	}

	// Step 1: every agent trusts the new CA.
	var trustLag []Straggler
	c := &rep.Agents
	for _, a := range agents {
		c.Total++
		newOK, oldOK := trustsAny(a, newCAs), trustsAny(a, oldCAs)
		if newOK {
			c.TrustNew++
		}
		if oldOK {
			c.TrustOld++
		}
		switch a.TrustReading {
		case agentrpc.TrustUnknown:
			c.Unknown++
		case agentrpc.TrustAtStart:
			c.AtStart++
		}
		if newOK {
			continue
		}
		var why string
		switch a.TrustReading {
		case agentrpc.TrustUnknown:
			why = fmt.Sprintf("reports nothing about its trust: unknown, reads its CA bundle only at start (an older release); restart it once its bundle holds %s", newCAs.name)
		case agentrpc.TrustAtStart:
			why = fmt.Sprintf("its bundle lacks %s and it reads its bundle only at start: restart it once its bundle holds %s", newCAs.name, newCAs.name)
		default:
			why = fmt.Sprintf("its bundle lacks %s", newCAs.name)
		}
		trustLag = append(trustLag, Straggler{Kind: "agent", Name: a.ID, Replica: a.replica, Step: StepAddNewCA, Reason: why})
	}
	reportNote := fmt.Sprintf("(%d %s report)", len(reporting), plural(len(reporting), "replica", "replicas"))
	trustCount := fmt.Sprintf("%d/%d agents trust %s %s", c.TrustNew, c.Total, newCAs.name, reportNote)
	// Fewer agents than expected: the missing ones (reconnecting after a drain,
	// not started yet) are not seen, so their trust is unknown.
	few := c.Total < minAgents
	step1 := Step{Name: StepAddNewCA, Safe: true, Done: len(trustLag) == 0 && len(replicaIssues) == 0 && !few}
	switch {
	case step1.Done:
		step1.Why = trustCount
	case len(trustLag) == 0 && len(replicaIssues) == 0:
		step1.Why = fmt.Sprintf("%s: fewer agents report than the %d expected (agents away, such as reconnecting, are not counted)", trustCount, minAgents)
	default:
		step1.Why = trustCount + ": " + names(append(slices.Clone(replicaIssues), trustLag...))
	}

	// Step 2: every replica serves a leaf issued by the new CA.
	var serveLag []Straggler
	serving := 0
	for _, r := range rep.Replicas {
		s := r.Serves
		var why string
		switch {
		case s == nil:
			why = "cannot be inspected: " + r.ServeError
		case s.IssuedByNew && !s.HostnameOK:
			why = fmt.Sprintf("serves a leaf issued by %s that does not name the server name agents dial (serial %s; --server-name sets it)", newCAs.name, s.Serial)
		case s.IssuedByNew:
			serving++
			continue
		case s.IssuedByOld:
			why = fmt.Sprintf("still serves a leaf issued by %s (serial %s)", oldCAs.name, s.Serial)
		default:
			why = fmt.Sprintf("serves a leaf issued by neither %s nor %s (issuer %s, serial %s)", oldCAs.name, newCAs.name, s.Issuer, s.Serial)
		}
		serveLag = append(serveLag, Straggler{Kind: "replica", Name: r.Name, Step: StepSwitchServerCert, Reason: why})
	}
	serveCount := fmt.Sprintf("%d/%d replicas serve a leaf issued by %s", serving, len(rep.Replicas), newCAs.name)
	step2 := Step{Name: StepSwitchServerCert, Safe: step1.Done, Done: len(serveLag) == 0}
	switch {
	case !step2.Safe && few && len(trustLag) == 0 && len(replicaIssues) == 0:
		step2.Why = "not safe to switch the server certificate: " + strings.TrimPrefix(step1.Why, trustCount+": ")
	case !step2.Safe:
		step2.Why = "not safe to switch the server certificate: " + names(append(slices.Clone(replicaIssues), trustLag...))
	case step2.Done:
		step2.Why = serveCount
	default:
		step2.Why = serveCount + ": " + names(serveLag)
	}

	// Step 3: nobody needs the old CA any more.
	var oldLag []Straggler
	for _, a := range agents {
		if trustsAny(a, oldCAs) {
			oldLag = append(oldLag, Straggler{Kind: "agent", Name: a.ID, Replica: a.replica, Step: StepRemoveOldCA,
				Reason: fmt.Sprintf("its bundle still holds %s", oldCAs.name)})
		}
	}
	step3 := Step{Name: StepRemoveOldCA, Safe: step1.Done && step2.Done, Done: step1.Done && step2.Done && len(oldLag) == 0}
	switch {
	case !step3.Safe:
		blockers := serveLag
		if !step1.Done {
			blockers = append(append(slices.Clone(replicaIssues), trustLag...), serveLag...)
		}
		step3.Why = fmt.Sprintf("not safe to remove %s: %s", oldCAs.name, names(blockers))
	case step3.Done:
		step3.Why = fmt.Sprintf("no agent trusts %s any more %s", oldCAs.name, reportNote)
	default:
		step3.Why = fmt.Sprintf("%d/%d agents still trust %s: %s", len(oldLag), c.Total, oldCAs.name, names(oldLag))
	}
	rep.Steps = []Step{step1, step2, step3}

	rep.Stragglers = []Straggler{}
	switch {
	case !step1.Done:
		rep.Next = StepAddNewCA
		rep.Stragglers = append(append(rep.Stragglers, replicaIssues...), trustLag...)
		rep.Summary = fmt.Sprintf("step 1 (%s) not done: %s", StepAddNewCA, step1.Why)
	case !step2.Done:
		rep.Next = StepSwitchServerCert
		rep.Stragglers = append(rep.Stragglers, serveLag...)
		if serving == 0 {
			rep.Summary = fmt.Sprintf("step 1 done: %s; safe to switch the server certificate", trustCount)
		} else {
			rep.Summary = fmt.Sprintf("step 2 (%s) in progress: %s; %s", StepSwitchServerCert, serveCount, step3.Why)
		}
	case !step3.Done:
		rep.Next = StepRemoveOldCA
		rep.Stragglers = append(rep.Stragglers, oldLag...)
		rep.Summary = fmt.Sprintf("step 2 done: %s and %s; safe to remove %s", serveCount, trustCount, oldCAs.name)
	default:
		rep.Summary = fmt.Sprintf("rotation complete: %s, %s, none trusts %s", serveCount, trustCount, oldCAs.name)
	}
}

// names lists stragglers for a sentence: "replica cp-1 still serves …; agent a-7
// (on cp-0): its bundle lacks …", at most five and a count of the rest.
func names(ss []Straggler) string {
	const most = 5
	parts := make([]string, 0, most+1)
	for i, s := range ss {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(ss)-most))
			break
		}
		switch s.Kind {
		case "agent":
			parts = append(parts, fmt.Sprintf("agent %s (on %s): %s", s.Name, s.Replica, s.Reason))
		default:
			parts = append(parts, fmt.Sprintf("replica %s %s", s.Name, s.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
