package census

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// Step is the verdict on one step of the rotation.
type Step struct {
	// Name is a v1alpha1 Step* name.
	Name string
	// Safe: it can be taken now without failing a handshake. Done: its effect
	// is proven everywhere.
	Safe, Done bool
	// Reason is a v1alpha1 Reason* (the step condition's reason), Message
	// says why, naming the stragglers.
	Reason, Message string
}

// Result is one census.
type Result struct {
	// Consumers are every consumer, judged, sorted by namespace, pod,
	// container and object.
	Consumers []Consumer
	Counts    v1alpha1.ConsumerCounts
	// Steps are the verdicts, in order.
	Steps []Step
	// Next is the first step not done ("" once the rotation is complete).
	Next    string
	Summary string
	// Stragglers hold Next back: the objects first (with no pod), then the
	// consumers, at most v1alpha1.MaxStragglers; Omitted counts the rest.
	Stragglers []v1alpha1.Straggler
	Omitted    int
}

// Take takes the census of in.
func Take(in Input) Result {
	var r Result
	n := 0
	for _, p := range in.Pods {
		n += len(p.Uses)
	}
	// Sized once: at 10,000 pods the consumers are the census's largest
	// allocation (a few MiB), and growing the slice would allocate it twice.
	r.Consumers = make([]Consumer, 0, n)
	for _, p := range in.Pods {
		ack := ""
		if in.Acknowledged != nil {
			ack = in.Acknowledged(p)
		}
		for _, u := range p.Uses {
			c := Consumer{Pod: p, Use: u, Object: in.Objects[u.Object], Acknowledged: ack}
			in.judge(&c)
			r.Consumers = append(r.Consumers, c)
		}
	}
	slices.SortFunc(r.Consumers, func(a, b Consumer) int {
		return cmp.Or(cmp.Compare(a.Pod.Namespace, b.Pod.Namespace), cmp.Compare(a.Pod.Name, b.Pod.Name),
			cmp.Compare(a.Use.Container, b.Use.Container), cmp.Compare(a.Use.Object, b.Use.Object))
	})
	r.count()
	j := judgement{in: &in, r: &r}
	add := j.step(v1alpha1.StepAddNewCA, true, RoleTrust,
		func(o State) bool { return o.HoldsNew }, "does not hold "+in.NewCA.Name,
		func(c Consumer) Fact { return c.TrustsNew }, Yes, "trust "+in.NewCA.Name)
	sw := j.step(v1alpha1.StepSwitchServerCert, add.Done, RoleServer,
		func(o State) bool { return o.HoldsNew }, "does not hold a leaf issued by "+in.NewCA.Name,
		func(c Consumer) Fact { return c.ServesNew }, Yes, "serve a leaf issued by "+in.NewCA.Name)
	rm := j.step(v1alpha1.StepRemoveOldCA, add.Done && sw.Done, RoleTrust,
		func(o State) bool { return !o.HoldsOld }, "still holds "+in.OldCA.Name,
		func(c Consumer) Fact { return c.TrustsOld }, No, "no longer trust "+in.OldCA.Name)
	r.Steps = []Step{add, sw, rm}
	j.summarize()
	return r
}

// count fills in r.Counts.
func (r *Result) count() {
	pods := map[string]bool{}
	c := &r.Counts
	for _, k := range r.Consumers {
		pods[k.Pod.Key()] = true
		c.Total++
		switch weakest(k) {
		case v1alpha1.EvidenceReported:
			c.ByEvidence.Reported++
		case v1alpha1.EvidenceServed:
			c.ByEvidence.Served++
		case v1alpha1.EvidenceRestarted:
			c.ByEvidence.Restarted++
		case v1alpha1.EvidenceNever:
			c.ByEvidence.Never++
		case v1alpha1.EvidenceAcknowledged:
			c.ByEvidence.Acknowledged++
		default:
			c.ByEvidence.Unknown++
		}
		switch state(k) {
		case "new":
			c.ByState.New++
		case "both":
			c.ByState.Both++
		case "old":
			c.ByState.Old++
		case "neither":
			c.ByState.Neither++
		default:
			c.ByState.Unknown++
		}
	}
	c.Pods = int32(len(pods))
}

// facts are the facts the rotation needs of consumer k.
func facts(k Consumer) []Fact {
	if k.Object.Role == RoleServer {
		return []Fact{k.ServesNew}
	}
	return []Fact{k.TrustsNew, k.TrustsOld}
}

// weakest is the weakest evidence of k's facts.
func weakest(k Consumer) string {
	rank := map[string]int{v1alpha1.EvidenceAcknowledged: 0, v1alpha1.EvidenceReported: 1, v1alpha1.EvidenceServed: 1,
		v1alpha1.EvidenceRestarted: 2, v1alpha1.EvidenceNever: 3, v1alpha1.EvidenceUnknown: 4}
	w := ""
	for _, f := range facts(k) {
		if r, ok := rank[f.Evidence]; !ok || w == "" || r > rank[w] {
			w = f.Evidence
			if !ok {
				w = v1alpha1.EvidenceUnknown
			}
		}
	}
	return w
}

// state is what k is known to hold: new, both, old, neither or unknown.
func state(k Consumer) string {
	if k.Object.Role == RoleServer {
		switch k.ServesNew.Value {
		case Yes:
			return "new"
		case No:
			return "old"
		}
		return "unknown"
	}
	switch [2]Tri{k.TrustsNew.Value, k.TrustsOld.Value} {
	case [2]Tri{Yes, No}:
		return "new"
	case [2]Tri{Yes, Yes}:
		return "both"
	case [2]Tri{No, Yes}:
		return "old"
	case [2]Tri{No, No}:
		return "neither"
	}
	return "unknown"
}

// judgement is what the steps share.
type judgement struct {
	in *Input
	r  *Result
	// blockers are, per step, its stragglers: the first
	// v1alpha1.MaxStragglers of them, and how many there are. Only those
	// are ever shown; keeping every one would make each census of 10,000
	// pods at the start of a rotation allocate 10,000 per step.
	blockers map[string]blockers
	// objectNames are the objects' String(), by index, made once: every
	// straggler of every step names its object.
	objectNames []string
}

// objectName is the String() of object i.
func (j *judgement) objectName(i int) string {
	if j.objectNames == nil {
		j.objectNames = make([]string, len(j.in.Objects))
		for k, o := range j.in.Objects {
			j.objectNames[k] = o.Object.String()
		}
	}
	return j.objectNames[i]
}

// step judges one step: safe is whether the steps before it are done; it is
// done once every object of role holds (objOK) and every consumer of role
// is proven to hold fact want.
func (j *judgement) step(name string, safe bool, role Role, objOK func(State) bool, objLacks string,
	fact func(Consumer) Fact, want Tri, verb string) Step {
	if j.blockers == nil {
		j.blockers = map[string]blockers{}
	}
	var b blockers
	objs, cons := 0, 0
	unread := 0
	for _, o := range j.in.Objects {
		if o.Role != role {
			continue
		}
		switch {
		case o.Err != "":
			unread++
			objs++
			if b.keeps() {
				b.first = append(b.first, v1alpha1.Straggler{Object: o.Object.String(), Step: name, Reason: "cannot be read: " + o.Err})
			}
		case !objOK(o):
			objs++
			if b.keeps() {
				b.first = append(b.first, v1alpha1.Straggler{Object: o.Object.String(), Step: name, Reason: objLacks})
			}
		}
	}
	total, proven, unprovable := 0, 0, 0
	for _, k := range j.r.Consumers {
		if k.Object.Role != role {
			continue
		}
		total++
		f := fact(k)
		if f.is(want) {
			proven++
			continue
		}
		if f.Value == Unknown || !f.proven() {
			unprovable++ // what is left cannot be proven until it restarts or reports
		}
		cons++
		if b.keeps() {
			b.first = append(b.first, v1alpha1.Straggler{Namespace: k.Pod.Namespace, Pod: k.Pod.Name, Container: k.Use.Container,
				Object: j.objectName(k.Use.Object), How: string(k.Use.How), Evidence: f.Evidence, Step: name, Reason: f.Why})
		}
	}
	j.blockers[name] = b
	count := fmt.Sprintf("%d/%d consumers proven to %s", proven, total, verb)
	if role == RoleServer && total == 0 && objs == 0 {
		count = "no pod mounts a server certificate"
		if !slices.ContainsFunc(j.in.Objects, func(o State) bool { return o.Role == RoleServer }) {
			count = "no server certificates declared"
		}
	}
	s := Step{Name: name, Safe: safe}
	short := ""
	if role == RoleTrust && j.in.MinConsumers > 0 && len(j.r.Consumers) < j.in.MinConsumers {
		short = fmt.Sprintf("fewer consumers found (%d) than the %d expected", len(j.r.Consumers), j.in.MinConsumers)
	}
	switch {
	case !safe:
		s.Reason = v1alpha1.ReasonNotSafe
		s.Message = fmt.Sprintf("not safe yet: %s; %s", j.notSafeWhy(name), count)
	case b.total == 0 && short == "":
		s.Done, s.Reason, s.Message = true, v1alpha1.ReasonDone, strings.TrimSpace(count+" "+evidenceNote(j.r.Consumers, role))
	case b.total == 0:
		s.Reason, s.Message = v1alpha1.ReasonInProgress, count+": "+short
	case objs == 0 && unprovable == cons:
		s.Reason, s.Message = v1alpha1.ReasonUnproven, count+": "+b.names()
	default:
		s.Reason, s.Message = v1alpha1.ReasonInProgress, count+": "+b.names()
	}
	return s
}

// notSafeWhy names the first step before name that is not done.
func (j *judgement) notSafeWhy(name string) string {
	for _, prev := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert} {
		if prev == name {
			break
		}
		if b := j.blockers[prev]; b.total > 0 {
			return prev + " is not done: " + b.names()
		}
	}
	return "a step before it is not done"
}

// evidenceNote says how the consumers of role are known: "(3 reported, 1
// restarted)".
func evidenceNote(cs []Consumer, role Role) string {
	n := map[string]int{}
	for _, k := range cs {
		if k.Object.Role == role {
			n[weakest(k)]++
		}
	}
	var parts []string
	for _, e := range []string{v1alpha1.EvidenceReported, v1alpha1.EvidenceServed, v1alpha1.EvidenceRestarted, v1alpha1.EvidenceAcknowledged} {
		if n[e] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[e], e))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// summarize names the first step not done and its stragglers.
func (j *judgement) summarize() {
	r := j.r
	for i, s := range r.Steps {
		if s.Done {
			continue
		}
		r.Next = s.Name
		b := j.blockers[s.Name]
		r.Omitted = b.total - len(b.first)
		r.Stragglers = b.first
		if i == 0 || !s.Safe {
			r.Summary = fmt.Sprintf("step %d (%s) not done: %s", i+1, s.Name, s.Message)
		} else {
			r.Summary = fmt.Sprintf("step %d done, step %d (%s) not done: %s", i, i+1, s.Name, s.Message)
		}
		return
	}
	r.Summary = "rotation complete: " + r.Steps[len(r.Steps)-1].Message
}

// blockers are a step's stragglers: the first v1alpha1.MaxStragglers, and
// how many there are.
type blockers struct {
	first []v1alpha1.Straggler
	total int
}

// keeps counts one more straggler and reports whether it is among the
// first, to be kept.
func (b *blockers) keeps() bool {
	b.total++
	return len(b.first) < v1alpha1.MaxStragglers
}

// names lists stragglers for a sentence, at most five and a count of the
// rest: "pod a/b container app (subPath): mounts it …; ConfigMap a/ca key
// ca.crt: does not hold CA-2026".
func (b blockers) names() string {
	const most = 5
	parts := make([]string, 0, most+1)
	for i, s := range b.first {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", b.total-most))
			break
		}
		if s.Pod == "" {
			parts = append(parts, fmt.Sprintf("%s %s", s.Object, s.Reason))
			continue
		}
		parts = append(parts, fmt.Sprintf("pod %s/%s container %s (%s, %s, %s): %s", s.Namespace, s.Pod, s.Container, s.How, s.Object, s.Evidence, s.Reason))
	}
	return strings.Join(parts, "; ")
}
