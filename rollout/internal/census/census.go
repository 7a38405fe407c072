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
	// container and object: only with Input.KeepConsumers.
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

// Take takes the census of in: Begin(in), Add(in.Pods, in.Reports,
// in.Served), Result.
func Take(in Input) Result {
	t := Begin(in)
	t.Add(in.Pods, in.Reports, in.Served)
	return t.Result()
}

// Tally is a census taken batch by batch, so that a census of 10,000 pods
// need not hold all of them at once: Begin, Add each batch of pods, then
// Result. It judges one consumer at a time, in the order of the pods'
// namespaces and names, and keeps of it its counts and, if it is among the
// stragglers a step shows, its straggler (judged again to say why): what a
// census holds does not grow with the fleet (but for Input.KeepConsumers).
type Tally struct {
	in Input
	r  Result
	j  judgement
	// last is the last pod added ("namespace", "name"), to count each pod
	// once.
	last    [2]string
	counted bool
}

// Begin starts the census of in (in.Pods, in.Reports and in.Served are
// ignored: Add gives them).
func Begin(in Input) *Tally {
	t := &Tally{in: in}
	t.in.Pods, t.in.Reports, t.in.Served = nil, nil, nil
	t.j = judgement{in: &t.in, r: &t.r}
	t.j.steps = [3]tally{
		{name: v1alpha1.StepAddNewCA, role: RoleTrust,
			objOK: func(o State) bool { return o.HoldsNew }, objLacks: "does not hold " + in.NewCA.Name,
			want: Yes, verb: "trust " + in.NewCA.Name},
		{name: v1alpha1.StepSwitchServerCert, role: RoleServer,
			objOK: func(o State) bool { return o.HoldsNew }, objLacks: "does not hold a leaf issued by " + in.NewCA.Name,
			want: Yes, verb: "serve a leaf issued by " + in.NewCA.Name},
		{name: v1alpha1.StepRemoveOldCA, role: RoleTrust,
			objOK: func(o State) bool { return !o.HoldsOld }, objLacks: "still holds " + in.OldCA.Name,
			want: No, verb: "no longer trust " + in.OldCA.Name},
	}
	for i := range t.j.steps {
		t.j.objects(&t.j.steps[i]) // the objects are a step's first stragglers
	}
	return t
}

// Add judges a batch of pods, with what they report and serve (by
// Pod.Key). The stragglers shown are the first in the order of namespaces
// and names: each batch's pods come after those of the batches before it
// in that order (within a batch, any order).
func (t *Tally) Add(pods []Pod, reports map[string][]Report, served map[string][]Served) {
	in := &t.in
	in.Pods, in.Reports, in.Served = pods, reports, served
	defer func() { in.Pods, in.Reports, in.Served = nil, nil, nil }()
	if in.KeepConsumers {
		n := 0
		for _, p := range pods {
			n += len(p.Uses)
		}
		// Grown when a batch does not fit, to at least twice its length:
		// at 10,000 pods the consumers are a few MiB, and growing by each
		// batch, or by append's 1.25 times at that size, would copy them
		// many times (BenchmarkJudge10kPodsKept).
		if cap(t.r.Consumers)-len(t.r.Consumers) < n {
			t.r.Consumers = slices.Grow(t.r.Consumers, max(n, len(t.r.Consumers)))
		}
	}
	for _, i := range podOrder(pods) {
		p := &pods[i]
		if len(p.Uses) == 0 {
			continue
		}
		if key := [2]string{p.Namespace, p.Name}; !t.counted || key != t.last {
			t.r.Counts.Pods++
			t.last, t.counted = key, true
		}
		ack := ""
		if in.Acknowledged != nil {
			ack = in.Acknowledged(*p)
		}
		uses := p.Uses
		if !slices.IsSortedFunc(uses, compareUses) {
			uses = slices.SortedFunc(slices.Values(p.Uses), compareUses)
		}
		for _, u := range uses {
			c := Consumer{Pod: *p, Use: u, Object: in.Objects[u.Object], Acknowledged: ack}
			in.judge(&c, explain(in.KeepConsumers))
			t.j.add(&c)
			if in.KeepConsumers {
				t.r.Consumers = append(t.r.Consumers, c)
			}
		}
	}
}

// Result makes the verdicts once every pod is added.
func (t *Tally) Result() Result {
	j := &t.j
	add := j.finish(&j.steps[0], true)
	sw := j.finish(&j.steps[1], add.Done)
	rm := j.finish(&j.steps[2], add.Done && sw.Done)
	t.r.Steps = []Step{add, sw, rm}
	j.summarize()
	return t.r
}

// podOrder is the indexes of pods in the order of their namespaces and
// names (the order of the consumers, and so of the stragglers shown).
func podOrder(pods []Pod) []int {
	order := make([]int, len(pods))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(pods[a].Namespace, pods[b].Namespace), cmp.Compare(pods[a].Name, pods[b].Name))
	})
	return order
}

func compareUses(a, b Use) int {
	return cmp.Or(cmp.Compare(a.Container, b.Container), cmp.Compare(a.Object, b.Object))
}

// count counts consumer k in c.
func count(c *v1alpha1.ConsumerCounts, k *Consumer) {
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

// rank orders evidence from the strongest (0) to the weakest (4, unknown:
// anything not known ranks as unknown).
func rank(evidence string) int {
	switch evidence {
	case v1alpha1.EvidenceAcknowledged:
		return 0
	case v1alpha1.EvidenceReported, v1alpha1.EvidenceServed:
		return 1
	case v1alpha1.EvidenceRestarted:
		return 2
	case v1alpha1.EvidenceNever:
		return 3
	}
	return 4
}

// known is evidence, or unknown when it is not a known class.
func known(evidence string) string {
	if rank(evidence) == 4 {
		return v1alpha1.EvidenceUnknown
	}
	return evidence
}

// weakest is the weakest evidence of the facts the rotation needs of k:
// whether it serves a leaf of the new CA (a server), whether it trusts the
// new CA and the old one (a trust consumer).
func weakest(k *Consumer) string {
	if k.Object.Role == RoleServer {
		return known(k.ServesNew.Evidence)
	}
	n, o := known(k.TrustsNew.Evidence), known(k.TrustsOld.Evidence)
	if rank(o) > rank(n) {
		return o
	}
	return n
}

// state is what k is known to hold: new, both, old, neither or unknown.
func state(k *Consumer) string {
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
	// steps are the three steps' tallies, in order.
	steps [3]tally
	// byRole counts, per role, the consumers by their weakest evidence
	// (for the note of a step done: "(3 reported, 1 restarted)").
	byRole [2]map[string]int
	// objectNames are the objects' String(), by index, made once: every
	// straggler of every step names its object.
	objectNames []string
}

// tally is one step as the consumers are judged: what it asks, and what
// was found so far.
type tally struct {
	name     string
	role     Role
	objOK    func(State) bool
	objLacks string
	want     Tri
	verb     string

	// b are its stragglers: the first v1alpha1.MaxStragglers of them, and
	// how many there are. Only those are ever shown; keeping every one
	// would make each census of 10,000 pods at the start of a rotation
	// allocate 10,000 per step.
	b                      blockers
	objs, cons, unprovable int
	total, proven          int
}

// fact is the fact t asks of k (a method, not a func field: k is on the
// stack of Take, and an indirect call would move every consumer to the
// heap).
func (t *tally) fact(k *Consumer) Fact {
	switch t.name {
	case v1alpha1.StepSwitchServerCert:
		return k.ServesNew
	case v1alpha1.StepRemoveOldCA:
		return k.TrustsOld
	}
	return k.TrustsNew
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

// objects tallies the objects of t's role that keep t from being done.
func (j *judgement) objects(t *tally) {
	for _, o := range j.in.Objects {
		if o.Role != t.role {
			continue
		}
		switch {
		case o.Err != "":
			t.objs++
			if t.b.keeps() {
				t.b.first = append(t.b.first, v1alpha1.Straggler{Object: o.Object.String(), Step: t.name, Reason: "cannot be read: " + o.Err})
			}
		case !t.objOK(o):
			t.objs++
			if t.b.keeps() {
				t.b.first = append(t.b.first, v1alpha1.Straggler{Object: o.Object.String(), Step: t.name, Reason: t.objLacks})
			}
		}
	}
}

// add counts judged consumer k, and tallies it in each step of its role;
// a straggler a step keeps is judged again, to say why.
func (j *judgement) add(k *Consumer) {
	count(&j.r.Counts, k)
	if m := &j.byRole[k.Object.Role]; *m == nil {
		*m = map[string]int{}
	}
	j.byRole[k.Object.Role][weakest(k)]++
	var explained *Consumer
	for i := range j.steps {
		t := &j.steps[i]
		if k.Object.Role != t.role {
			continue
		}
		t.total++
		f := t.fact(k)
		if f.is(t.want) {
			t.proven++
			continue
		}
		if f.Value == Unknown || !f.proven() {
			t.unprovable++ // what is left cannot be proven until it restarts or reports
		}
		t.cons++
		if !t.b.keeps() {
			continue
		}
		if explained == nil {
			explained = k
			if !j.in.KeepConsumers {
				e := Consumer{Pod: k.Pod, Use: k.Use, Object: k.Object, Acknowledged: k.Acknowledged}
				j.in.judge(&e, true)
				explained = &e
			}
		}
		f = t.fact(explained)
		t.b.first = append(t.b.first, v1alpha1.Straggler{Namespace: k.Pod.Namespace, Pod: k.Pod.Name, Container: k.Use.Container,
			Object: j.objectName(k.Use.Object), How: string(k.Use.How), Evidence: f.Evidence, Step: t.name, Reason: f.Why})
	}
}

// finish makes the verdict on step t, once every consumer is tallied: safe
// is whether the steps before it are done; it is done once every object of
// its role holds and every consumer of its role is proven to hold its fact.
func (j *judgement) finish(t *tally, safe bool) Step {
	b := t.b
	count := fmt.Sprintf("%d/%d consumers proven to %s", t.proven, t.total, t.verb)
	if t.role == RoleServer && t.total == 0 && t.objs == 0 {
		count = "no pod mounts a server certificate"
		if !slices.ContainsFunc(j.in.Objects, func(o State) bool { return o.Role == RoleServer }) {
			count = "no server certificates declared"
		}
	}
	s := Step{Name: t.name, Safe: safe}
	short := ""
	if total := int(j.r.Counts.Total); t.role == RoleTrust && j.in.MinConsumers > 0 && total < j.in.MinConsumers {
		short = fmt.Sprintf("fewer consumers found (%d) than the %d expected", total, j.in.MinConsumers)
	}
	switch {
	case !safe:
		s.Reason = v1alpha1.ReasonNotSafe
		s.Message = fmt.Sprintf("not safe yet: %s; %s", j.notSafeWhy(t.name), count)
	case b.total == 0 && short == "":
		s.Done, s.Reason, s.Message = true, v1alpha1.ReasonDone, strings.TrimSpace(count+" "+evidenceNote(j.byRole[t.role]))
	case b.total == 0:
		s.Reason, s.Message = v1alpha1.ReasonInProgress, count+": "+short
	case t.objs == 0 && t.unprovable == t.cons:
		s.Reason, s.Message = v1alpha1.ReasonUnproven, count+": "+b.names()
	default:
		s.Reason, s.Message = v1alpha1.ReasonInProgress, count+": "+b.names()
	}
	return s
}

// blockersOf is step name's stragglers.
func (j *judgement) blockersOf(name string) blockers {
	for _, t := range j.steps {
		if t.name == name {
			return t.b
		}
	}
	return blockers{}
}

// notSafeWhy names the first step before name that is not done.
func (j *judgement) notSafeWhy(name string) string {
	for _, prev := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert} {
		if prev == name {
			break
		}
		if b := j.blockersOf(prev); b.total > 0 {
			return prev + " is not done: " + b.names()
		}
	}
	return "a step before it is not done"
}

// evidenceNote says how the consumers of a role are known, from their
// counts by weakest evidence n: "(3 reported, 1 restarted)".
func evidenceNote(n map[string]int) string {
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
		b := j.blockersOf(s.Name)
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
