package rotation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

func trustsAny(a fleetAgent, side cas) bool {
	return slices.ContainsFunc(a.CAs, func(fp string) bool { return side.fps[fp] })
}

// judge fills in the counts, the verdict on each step, the stragglers and the
// summary, in named steps: merge the replicas' fleet views (with what mem
// remembers of earlier looks; nil for none), note which replicas report their
// fleet, count the agents, apply the fleet-size guard, then judge each rotation
// step on what the steps before it found, and sum up.
func judge(rep *Report, oldCAs, newCAs cas, minAgents int, mem *memory) {
	agents := mem.recall(mergeFleets(rep.Replicas), rep.Replicas, rep.CheckedAt)
	mem.note(agents, rep.Replicas, rep.CheckedAt)
	j := &judgement{rep: rep, oldCAs: oldCAs, newCAs: newCAs}
	for _, a := range agents {
		if a.departed {
			j.departed = append(j.departed, a)
		} else {
			j.agents = append(j.agents, a)
		}
	}
	j.readFleets()
	j.countAgents()
	j.checkFleetSize(minAgents)
	add := j.addNewCA()
	sw := j.switchServerCert(add)
	rm := j.removeOldCA(add, sw)
	rep.Steps = []Step{add, sw, rm}
	j.summarize(add, sw, rm)
}

// judgement is what judge's steps share: the inputs, and what each step found.
type judgement struct {
	rep            *Report
	oldCAs, newCAs cas
	agents         []fleetAgent // the connected agents of the replicas that report
	departed       []fleetAgent // the agents departed and not back yet

	unread     []Straggler // replicas whose fleet view is missing: every step waits on them
	reportNote string      // "(reported by 2 of 2 replicas)", for sentences about the fleet
	shortfall  string      // why the fleet seen is too small to judge ("" when it is not)

	trustLag   []Straggler // agents that do not trust the new CA
	away       []Straggler // departed agents: not proven until they are back
	trustCount string      // "3/4 connected agents trust … (reported by 2 of 2 replicas)"
	serveLag   []Straggler // replicas that do not serve a usable leaf of the new CA
	serving    int         // replicas that do
	serveCount string      // "1/2 replicas serve a leaf issued by …"
	oldLag     []Straggler // agents that still trust the old CA
}

// readFleets notes which replicas report their agents' trust: one that does not
// holds every step back.
func (j *judgement) readFleets() {
	reporting := 0
	for _, r := range j.rep.Replicas {
		if r.fleet != nil {
			reporting++
			continue
		}
		j.unread = append(j.unread, Straggler{Kind: "replica", Name: r.Name, Step: StepAddNewCA,
			Reason: "does not report its agents' trust: " + r.StatusError})
	}
	n := len(j.rep.Replicas)
	j.reportNote = fmt.Sprintf("(reported by %d of %d %s)", reporting, n, plural(n, "replica", "replicas"))
}

// countAgents fills in the report's agent counts.
func (j *judgement) countAgents() {
	c := &j.rep.Agents
	for _, a := range j.agents {
		c.Total++
		if trustsAny(a, j.newCAs) {
			c.TrustNew++
		}
		if trustsAny(a, j.oldCAs) {
			c.TrustOld++
		}
		switch a.TrustReading {
		case agentrpc.TrustUnknown:
			c.Unknown++
		case agentrpc.TrustAtStart:
			c.AtStart++
		}
	}
	c.Departed = len(j.departed)
}

// checkFleetSize is the guard every step shares. Fewer connected agents than
// expected means the missing ones (not started yet, or away for longer than the
// replicas remember departed agents) are not seen, so their trust is unknown and
// step 1 cannot be done.
func (j *judgement) checkFleetSize(minAgents int) {
	if got := j.rep.Agents.Total; got < minAgents {
		j.shortfall = fmt.Sprintf("fewer agents report than the %d expected (%d connected; agents away longer than the replicas remember them are not counted)", minAgents, got)
	}
}

// addNewCA is step 1: every agent of every replica trusts the new CA.
func (j *judgement) addNewCA() Step {
	for _, a := range j.agents {
		if !trustsAny(a, j.newCAs) {
			j.trustLag = append(j.trustLag, Straggler{Kind: "agent", Name: a.ID, Replica: a.replica, Step: StepAddNewCA, Reason: j.lacksNewCA(a)})
		}
	}
	for _, a := range j.departed {
		j.away = append(j.away, Straggler{Kind: "agent", Name: a.ID, Replica: a.replica, Step: StepAddNewCA, Reason: departedReason(a), LastSeen: new(a.lastSeen.UTC())})
	}
	c := j.rep.Agents
	j.trustCount = fmt.Sprintf("%d/%d connected agents trust %s", c.TrustNew, c.Total, j.newCAs.name)
	if c.Departed > 0 {
		j.trustCount += fmt.Sprintf(", %d departed %s not back yet", c.Departed, plural(c.Departed, "agent", "agents"))
	}
	j.trustCount += " " + j.reportNote
	wait := j.trustWait()
	s := Step{Name: StepAddNewCA, Safe: true, Done: wait == "", Why: j.trustCount}
	if !s.Done {
		s.Why += ": " + wait
	}
	return s
}

// lacksNewCA says why agent a, which does not trust the new CA, holds step 1 back.
func (j *judgement) lacksNewCA(a fleetAgent) string {
	switch a.TrustReading {
	case agentrpc.TrustUnknown:
		return fmt.Sprintf("reports nothing about its trust: unknown, reads its CA bundle only at start (an older release); restart it once its bundle holds %s", j.newCAs.name)
	case agentrpc.TrustAtStart:
		return fmt.Sprintf("its bundle lacks %s and it reads its bundle only at start: restart it once its bundle holds %s", j.newCAs.name, j.newCAs.name)
	default:
		return fmt.Sprintf("its bundle lacks %s", j.newCAs.name)
	}
}

// trustBlockers are the replicas and agents that hold step 1 back.
func (j *judgement) trustBlockers() []Straggler {
	return slices.Concat(j.unread, j.trustLag, j.away)
}

// trustWait says what step 1 waits for: its blockers, else the fleet's shortfall
// ("" when it waits for nothing).
func (j *judgement) trustWait() string {
	if b := j.trustBlockers(); len(b) > 0 {
		return names(b)
	}
	return j.shortfall
}

// switchServerCert is step 2: every replica serves a leaf issued by the new CA.
// It is safe once step 1 is done.
func (j *judgement) switchServerCert(add Step) Step {
	for _, r := range j.rep.Replicas {
		if why := j.notServingNew(r); why != "" {
			j.serveLag = append(j.serveLag, Straggler{Kind: "replica", Name: r.Name, Step: StepSwitchServerCert, Reason: why})
			continue
		}
		j.serving++
	}
	j.serveCount = fmt.Sprintf("%d/%d replicas serve a leaf issued by %s", j.serving, len(j.rep.Replicas), j.newCAs.name)
	s := Step{Name: StepSwitchServerCert, Safe: add.Done, Done: len(j.serveLag) == 0}
	switch {
	case !s.Safe:
		s.Why = "not safe to switch the server certificate: " + j.trustWait()
	case s.Done:
		s.Why = j.serveCount
	default:
		s.Why = j.serveCount + ": " + names(j.serveLag)
	}
	return s
}

// notServingNew says why replica r holds step 2 back ("" when it serves a leaf
// issued by the new CA that names the server name).
func (j *judgement) notServingNew(r ReplicaReport) string {
	s := r.Serves
	switch {
	case s == nil:
		return "cannot be inspected: " + r.ServeError
	case s.IssuedByNew && !s.HostnameOK:
		return fmt.Sprintf("serves a leaf issued by %s that does not name the server name agents dial (serial %s; --server-name sets it)", j.newCAs.name, s.Serial)
	case s.IssuedByNew:
		return ""
	case s.IssuedByOld:
		return fmt.Sprintf("still serves a leaf issued by %s (serial %s)", j.oldCAs.name, s.Serial)
	default:
		return fmt.Sprintf("serves a leaf issued by neither %s nor %s (issuer %s, serial %s)", j.oldCAs.name, j.newCAs.name, s.Issuer, s.Serial)
	}
}

// removeOldCA is step 3: no agent needs the old CA any more. It is safe once steps
// 1 and 2 are done.
func (j *judgement) removeOldCA(add, sw Step) Step {
	for _, a := range j.agents {
		if trustsAny(a, j.oldCAs) {
			j.oldLag = append(j.oldLag, Straggler{Kind: "agent", Name: a.ID, Replica: a.replica, Step: StepRemoveOldCA,
				Reason: fmt.Sprintf("its bundle still holds %s", j.oldCAs.name)})
		}
	}
	s := Step{Name: StepRemoveOldCA, Safe: add.Done && sw.Done}
	s.Done = s.Safe && len(j.oldLag) == 0
	switch {
	case !s.Safe:
		// What steps 1 and 2 wait for: step 1's blockers or shortfall (fewer agents
		// than --min-agents names no straggler), then the replicas of step 2.
		var waits []string
		if !add.Done {
			waits = append(waits, j.trustWait())
		}
		if len(j.serveLag) > 0 {
			waits = append(waits, names(j.serveLag))
		}
		s.Why = fmt.Sprintf("not safe to remove %s: %s", j.oldCAs.name, strings.Join(waits, "; "))
	case s.Done:
		s.Why = fmt.Sprintf("no connected agent trusts %s any more %s", j.oldCAs.name, j.reportNote)
	default:
		s.Why = fmt.Sprintf("%d/%d connected agents still trust %s: %s", len(j.oldLag), j.rep.Agents.Total, j.oldCAs.name, names(j.oldLag))
	}
	return s
}

// summarize names the first step not done, its stragglers and, in one sentence,
// where the rotation stands.
func (j *judgement) summarize(add, sw, rm Step) {
	rep := j.rep
	rep.Stragglers = []Straggler{}
	switch {
	case !add.Done:
		rep.Next = StepAddNewCA
		rep.Stragglers = append(rep.Stragglers, j.trustBlockers()...)
		rep.Summary = fmt.Sprintf("step 1 (%s) not done: %s", StepAddNewCA, add.Why)
	case !sw.Done:
		rep.Next = StepSwitchServerCert
		rep.Stragglers = append(rep.Stragglers, j.serveLag...)
		if j.serving == 0 {
			rep.Summary = fmt.Sprintf("step 1 done: %s; safe to switch the server certificate", j.trustCount)
		} else {
			rep.Summary = fmt.Sprintf("step 2 (%s) in progress: %s; %s", StepSwitchServerCert, j.serveCount, rm.Why)
		}
	case !rm.Done:
		rep.Next = StepRemoveOldCA
		rep.Stragglers = append(rep.Stragglers, j.oldLag...)
		rep.Summary = fmt.Sprintf("step 2 done: %s and %s; safe to remove %s", j.serveCount, j.trustCount, j.oldCAs.name)
	default:
		rep.Summary = fmt.Sprintf("rotation complete: %s, %s, none trusts %s", j.serveCount, j.trustCount, j.oldCAs.name)
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
