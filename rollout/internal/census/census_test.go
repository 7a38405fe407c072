package census

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

var (
	t0     = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC) // the census saw the new CA in the trust objects
	at     = func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	newCA  = CA{Name: "CA-2026", SHA256: map[string]bool{"n1": true}, Subjects: map[string]bool{"CN=CA-2026": true}}
	oldCA  = CA{Name: "CA-2025", SHA256: map[string]bool{"o1": true}, Subjects: map[string]bool{"CN=CA-2025": true}}
	both   = map[string]bool{"n1": true, "o1": true}
	onlyOl = map[string]bool{"o1": true}
)

// fleet is a census input under construction: objects 0 (ConfigMap ns/ca
// key ca.crt), 1 (ClusterTrustBundle agents-2026), both holding both CAs
// since t0, and 2 (the server certificate Secret ns/cp-tls, a leaf of the
// new CA since 10:10).
type fleet struct{ in Input }

func newFleet() *fleet {
	return &fleet{in: Input{
		OldCA: oldCA, NewCA: newCA,
		Objects: []State{
			{Object: caCM, HoldsNew: true, HoldsOld: true, NewSince: t0},
			{Object: ctbByName, HoldsNew: true, HoldsOld: true, NewSince: t0},
			{Object: serverTLS, HoldsNew: true, LeafSHA256: "leafnew", NewSince: at(10)},
		},
		Reports: map[string][]Report{}, Served: map[string][]Served{},
		VolumeDelay: 2 * time.Minute, CTBDelay: 6 * time.Minute,
		KeepConsumers: true,
	}}
}

// pod adds a pod of one container "app" started at start (zero: not
// running) using object obj as how.
func (f *fleet) pod(name string, start time.Time, obj int, how How) *fleet {
	p := Pod{Namespace: "ns", Name: name, Uses: []Use{{Container: "app", Object: obj, How: how}}}
	if !start.IsZero() {
		p.Started = []Start{StartOf("app", start)}
	}
	f.in.Pods = append(f.in.Pods, p)
	return f
}

func (f *fleet) reports(pod string, r Report) *fleet {
	f.in.Reports["ns/"+pod] = append(f.in.Reports["ns/"+pod], r)
	return f
}

func (f *fleet) serves(pod string, s Served) *fleet {
	f.in.Served["ns/"+pod] = append(f.in.Served["ns/"+pod], s)
	return f
}

func consumer(t *testing.T, r Result, pod string) Consumer {
	t.Helper()
	for _, c := range r.Consumers {
		if c.Pod.Name == pod {
			return c
		}
	}
	t.Fatalf("no consumer in pod %s", pod)
	return Consumer{}
}

// mixedFleet is one of every kind of consumer, with the ground truth the
// census must find: what it says of the new CA (or, for servers, of the new
// leaf), with which evidence.
func mixedFleet() (*fleet, map[string]Fact) {
	f := newFleet().
		pod("lib-client", at(-60), 0, HowVolume).reports("lib-client", Report{CAs: both}).
		pod("lib-stale", at(-60), 0, HowVolume).reports("lib-stale", Report{CAs: onlyOl}).
		pod("restart-after", at(3), 0, HowVolume).
		pod("restart-before", at(1), 0, HowVolume).
		pod("subpath-old", at(-60), 0, HowSubPath).
		pod("subpath-new", at(5), 0, HowSubPath).
		pod("env-old", at(-60), 0, HowEnv).
		pod("ctb-early", at(3), 1, HowClusterTrustBundle).
		pod("ctb-late", at(7), 1, HowClusterTrustBundle).
		pod("liar", at(-60), 0, HowVolume).
		pod("not-running", time.Time{}, 0, HowVolume).
		pod("server-served-new", at(-60), 2, HowVolume).serves("server-served-new", Served{Endpoint: "10.0.0.1:443", IssuedByNew: true, HostnameOK: true}).
		pod("server-served-old", at(-60), 2, HowVolume).serves("server-served-old", Served{Endpoint: "10.0.0.2:443", IssuedByOld: true, Serial: "0A"}).
		pod("server-bad-name", at(-60), 2, HowVolume).serves("server-bad-name", Served{Endpoint: "10.0.0.5:443", IssuedByNew: true, Serial: "0B"}).
		pod("server-refused", at(13), 2, HowVolume).serves("server-refused", Served{Endpoint: "10.0.0.3:443", Err: "connection refused"}).
		pod("server-reported", at(-60), 2, HowVolume).reports("server-reported", Report{Leaves: []Leaf{{SHA256: "leafnew", Issuer: "CN=CA-2026"}}}).
		pod("server-reported-old", at(-60), 2, HowVolume).reports("server-reported-old", Report{Leaves: []Leaf{{SHA256: "leafold", Issuer: "CN=CA-2025"}}}).
		pod("server-early", at(11), 2, HowVolume)
	r, u, n, rs, s := v1alpha1.EvidenceReported, v1alpha1.EvidenceUnknown, v1alpha1.EvidenceNever, v1alpha1.EvidenceRestarted, v1alpha1.EvidenceServed
	return f, map[string]Fact{
		"lib-client":          {Value: Yes, Evidence: r},
		"lib-stale":           {Value: No, Evidence: r},
		"restart-after":       {Value: Yes, Evidence: rs},
		"restart-before":      {Value: Unknown, Evidence: u},
		"subpath-old":         {Value: Unknown, Evidence: n},
		"subpath-new":         {Value: Yes, Evidence: rs},
		"env-old":             {Value: Unknown, Evidence: n},
		"ctb-early":           {Value: Unknown, Evidence: u}, // after the volume delay, not the projection's
		"ctb-late":            {Value: Yes, Evidence: rs},
		"liar":                {Value: Unknown, Evidence: u},
		"not-running":         {Value: Unknown, Evidence: u},
		"server-served-new":   {Value: Yes, Evidence: s},
		"server-served-old":   {Value: No, Evidence: s},
		"server-bad-name":     {Value: No, Evidence: s},
		"server-refused":      {Value: Yes, Evidence: rs}, // no handshake completed: its start time speaks
		"server-reported":     {Value: Yes, Evidence: r},
		"server-reported-old": {Value: No, Evidence: r},
		"server-early":        {Value: Unknown, Evidence: u},
	}
}

// TestMixedFleetMatchesGroundTruth: every consumer of a mixed fleet is found
// to hold what it holds, with the evidence that can be had of it, and no
// more.
func TestMixedFleetMatchesGroundTruth(t *testing.T) {
	f, truth := mixedFleet()
	r := Take(f.in)
	if len(r.Consumers) != len(truth) {
		t.Fatalf("%d consumers, want %d", len(r.Consumers), len(truth))
	}
	for pod, want := range truth {
		c := consumer(t, r, pod)
		got := c.TrustsNew
		if c.Object.Role == RoleServer {
			got = c.ServesNew
		}
		if got.Value != want.Value || got.Evidence != want.Evidence {
			t.Errorf("%s: %v/%s (%s), want %v/%s", pod, got.Value, got.Evidence, got.Why, want.Value, want.Evidence)
		}
		if !got.is(Yes) && got.Why == "" {
			t.Errorf("%s: not proven, and no reason given", pod)
		}
	}
	for pod, want := range map[string]string{
		"subpath-old":    "mounts it with subPath, which is never updated, and started at 2026-01-01T09:00:00Z, before CA-2026 was added to ConfigMap ns/ca key ca.crt (seen at 2026-01-01T10:00:00Z; the kubelet takes up to 2m0s): restart it",
		"env-old":        "reads it from env, which is never updated",
		"restart-before": "reports nothing, and started at 2026-01-01T10:01:00Z, before CA-2026 was added",
		"ctb-early":      "the kubelet takes up to 6m0s",
		"lib-stale":      "reports a bundle without CA-2026",
		"not-running":    "its container is not running",
	} {
		if got := consumer(t, r, pod).TrustsNew.Why; !strings.Contains(got, want) {
			t.Errorf("%s: reason %q, want it to contain %q", pod, got, want)
		}
	}
	if got := consumer(t, r, "server-served-old").ServesNew.Why; got != "still serves on 10.0.0.2:443 a leaf issued by CA-2025 (serial 0A)" {
		t.Errorf("server-served-old: %q", got)
	}
	if got := consumer(t, r, "server-bad-name").ServesNew.Why; !strings.Contains(got, "does not name the server name") {
		t.Errorf("server-bad-name: %q", got)
	}

	// Counts: every consumer once, by its weakest evidence; nothing unproven
	// counted as proven.
	c := r.Counts
	if c.Total != int32(len(truth)) || c.Pods != int32(len(truth)) {
		t.Errorf("counts %+v", c)
	}
	e := c.ByEvidence
	want := v1alpha1.EvidenceCounts{Reported: 4, Served: 3, Restarted: 4, Never: 2, Unknown: 5}
	if e != want || e.Reported+e.Served+e.Restarted+e.Never+e.Unknown != c.Total {
		t.Errorf("by evidence %+v, want %+v", e, want)
	}
}

// TestStepsOfAMixedFleet: step 1 waits on the consumers not proven to trust
// the new CA, naming each; a subPath consumer left on its old file keeps
// step 1 from being done, so the later steps are not safe.
func TestStepsOfAMixedFleet(t *testing.T) {
	f, _ := mixedFleet()
	r := Take(f.in)
	add, sw, rm := r.Steps[0], r.Steps[1], r.Steps[2]
	if add.Done || !add.Safe || add.Reason != v1alpha1.ReasonInProgress {
		t.Fatalf("add-new-ca %+v", add)
	}
	if sw.Safe || sw.Reason != v1alpha1.ReasonNotSafe || rm.Safe || rm.Reason != v1alpha1.ReasonNotSafe {
		t.Fatalf("switch %+v, remove %+v: want both not safe", sw, rm)
	}
	if !strings.HasPrefix(add.Message, "4/11 consumers proven to trust CA-2026: ") {
		t.Errorf("add-new-ca message %q", add.Message)
	}
	if !strings.HasPrefix(rm.Message, "not safe yet: add-new-ca is not done: pod ns/ctb-early") {
		t.Errorf("remove-old-ca message %q: want it to name the add-new-ca stragglers", rm.Message)
	}
	if !slices.ContainsFunc(r.Stragglers, func(s v1alpha1.Straggler) bool {
		return s.Pod == "subpath-old" && s.How == "subPath" && s.Evidence == v1alpha1.EvidenceNever
	}) {
		t.Errorf("stragglers %+v: want the subPath consumer among them", r.Stragglers)
	}
	if r.Next != v1alpha1.StepAddNewCA || len(r.Stragglers) != 7 || r.Omitted != 0 {
		t.Fatalf("next %q, %d stragglers (%d omitted)", r.Next, len(r.Stragglers), r.Omitted)
	}
	for _, s := range r.Stragglers {
		if s.Step != v1alpha1.StepAddNewCA || s.Reason == "" || s.Evidence == "" || s.How == "" || s.Container != "app" {
			t.Errorf("straggler %+v", s)
		}
	}
	if !strings.HasPrefix(r.Summary, "step 1 (add-new-ca) not done: 4/11") {
		t.Errorf("summary %q", r.Summary)
	}
}

// TestUnprovenIsNotDone: once every consumer that can be proven is, what is
// left (never, unknown) keeps the step from being done, as Unproven; a
// person's acknowledgement lets it through, counted apart.
func TestUnprovenIsNotDone(t *testing.T) {
	f := newFleet().
		pod("lib-client", at(-60), 0, HowVolume).reports("lib-client", Report{CAs: both}).
		pod("subpath-old", at(-60), 0, HowSubPath)
	r := Take(f.in)
	if add := r.Steps[0]; add.Done || add.Reason != v1alpha1.ReasonUnproven {
		t.Fatalf("add-new-ca %+v, want Unproven", add)
	}
	f.in.Acknowledged = func(p Pod) string {
		if p.Name == "subpath-old" {
			return "restarted by hand at 10:20"
		}
		return ""
	}
	r = Take(f.in)
	if add := r.Steps[0]; !add.Done || add.Reason != v1alpha1.ReasonDone || add.Message != "2/2 consumers proven to trust CA-2026 (1 reported, 1 acknowledged)" {
		t.Fatalf("add-new-ca %+v, want done", add)
	}
	if r.Counts.ByEvidence.Acknowledged != 1 {
		t.Errorf("acknowledged %d, want 1", r.Counts.ByEvidence.Acknowledged)
	}
	if sw := r.Steps[1]; r.Next != v1alpha1.StepRemoveOldCA || !sw.Done || sw.Message != "no pod mounts a server certificate" {
		t.Fatalf("next %q, switch %+v", r.Next, sw)
	}
}

// TestWholeRotation walks the three steps to the end.
func TestWholeRotation(t *testing.T) {
	f := newFleet().
		pod("lib-client", at(-60), 0, HowVolume).reports("lib-client", Report{CAs: both}).
		pod("restart-after", at(3), 0, HowVolume).
		pod("server", at(-60), 2, HowVolume).serves("server", Served{Endpoint: "10.0.0.1:443", IssuedByNew: true, HostnameOK: true})
	r := Take(f.in)
	if !r.Steps[0].Done || !r.Steps[1].Done || r.Steps[2].Done || r.Next != v1alpha1.StepRemoveOldCA {
		t.Fatalf("steps %+v", r.Steps)
	}
	if r.Steps[2].Reason != v1alpha1.ReasonInProgress || !strings.Contains(r.Steps[2].Message, "ConfigMap ns/ca key ca.crt still holds CA-2025") {
		t.Fatalf("remove-old-ca %+v", r.Steps[2])
	}
	if !strings.HasPrefix(r.Summary, "step 2 done, step 3 (remove-old-ca) not done") {
		t.Errorf("summary %q", r.Summary)
	}

	// The old CA leaves the bundles at 10:20. The library client reloads;
	// the consumer that read at start before 10:22 may still trust it.
	for i := range f.in.Objects[:2] {
		f.in.Objects[i].HoldsOld, f.in.Objects[i].OldGoneSince = false, at(20)
	}
	f.in.Reports["ns/lib-client"] = []Report{{CAs: map[string]bool{"n1": true}}}
	r = Take(f.in)
	if rm := r.Steps[2]; rm.Done || rm.Reason != v1alpha1.ReasonUnproven || !strings.Contains(rm.Message, "pod ns/restart-after") {
		t.Fatalf("remove-old-ca %+v", rm)
	}
	// It restarts at 10:23.
	f.in.Pods[1].Started = []Start{StartOf("app", at(23))}
	r = Take(f.in)
	if rm := r.Steps[2]; !rm.Done || r.Next != "" || !strings.HasPrefix(r.Summary, "rotation complete: 2/2 consumers proven to no longer trust CA-2025") {
		t.Fatalf("remove-old-ca %+v, next %q, summary %q", rm, r.Next, r.Summary)
	}
	if s := r.Counts.ByState; s.New != 3 || s.Both+s.Old+s.Neither+s.Unknown != 0 {
		t.Errorf("by state %+v", s)
	}
}

// TestReportsAreAttributed: a report that names no container speaks for the
// pod's only consuming container, not for one of two.
func TestReportsAreAttributed(t *testing.T) {
	f := newFleet()
	f.in.Pods = []Pod{{Namespace: "ns", Name: "two", Started: []Start{StartOf("a", at(-60)), StartOf("b", at(-60))},
		Uses: []Use{{Container: "a", Object: 0, How: HowVolume}, {Container: "b", Object: 0, How: HowVolume}}}}
	f.reports("two", Report{CAs: both})
	r := Take(f.in)
	for _, c := range r.Consumers {
		if c.TrustsNew.Evidence != v1alpha1.EvidenceUnknown || !strings.Contains(c.TrustsNew.Why, "without naming the container") {
			t.Errorf("%s: %+v", c.Use.Container, c.TrustsNew)
		}
	}
	f.in.Reports["ns/two"] = []Report{{Container: "a", CAs: both}}
	r = Take(f.in)
	if a, b := r.Consumers[0].TrustsNew, r.Consumers[1].TrustsNew; !a.is(Yes) || a.Evidence != v1alpha1.EvidenceReported || b.Evidence != v1alpha1.EvidenceUnknown {
		t.Errorf("a %+v, b %+v", a, b)
	}
}

// TestFleetSizeAndObjects: too few consumers, or a trust object that cannot
// be read or lacks the new CA, keep step 1 from being done.
func TestFleetSizeAndObjects(t *testing.T) {
	f := newFleet().pod("lib-client", at(-60), 0, HowVolume).reports("lib-client", Report{CAs: both})
	f.in.MinConsumers = 2
	if add := Take(f.in).Steps[0]; add.Done || !strings.Contains(add.Message, "fewer consumers found (1) than the 2 expected") {
		t.Fatalf("add-new-ca %+v", add)
	}
	f.in.MinConsumers = 0
	f.in.Objects[1].Err = "forbidden"
	r := Take(f.in)
	if add := r.Steps[0]; add.Done || !strings.Contains(add.Message, "ClusterTrustBundle agents-2026 cannot be read: forbidden") {
		t.Fatalf("add-new-ca %+v", add)
	}
	if s := r.Stragglers[0]; s.Pod != "" || s.Object != "ClusterTrustBundle agents-2026" {
		t.Errorf("first straggler %+v, want the object", s)
	}
	f.in.Objects[1].Err, f.in.Objects[1].HoldsNew = "", false
	if add := Take(f.in).Steps[0]; add.Done || !strings.Contains(add.Message, "ClusterTrustBundle agents-2026 does not hold CA-2026") {
		t.Fatalf("add-new-ca %+v", add)
	}
}

// TestStragglersAreBounded: the status lists at most MaxStragglers.
func TestStragglersAreBounded(t *testing.T) {
	f := newFleet()
	for i := range v1alpha1.MaxStragglers + 7 {
		f.pod(fmt.Sprintf("p-%03d", i), at(-60), 0, HowSubPath)
	}
	r := Take(f.in)
	if len(r.Stragglers) != v1alpha1.MaxStragglers || r.Omitted != 7 {
		t.Fatalf("%d stragglers, %d omitted", len(r.Stragglers), r.Omitted)
	}
	if !strings.Contains(r.Steps[0].Message, "; and 52 more") {
		t.Errorf("message %q", r.Steps[0].Message)
	}
}

// TestTrackDates: an entry is dated when the census first sees it whole,
// keeps the date while it holds, and loses it when it stops; its objects
// take its date, or now while it is not whole.
func TestTrackDates(t *testing.T) {
	names := []string{"Bundle ca"}
	b := func(ns string, holdsNew, holdsOld bool) State {
		return State{Object: Object{Kind: KindConfigMap, Namespace: ns, Name: "ca", Key: "ca.crt"}, HoldsNew: holdsNew, HoldsOld: holdsOld}
	}
	now := t0.Add(500 * time.Millisecond)
	states := []State{b("a", true, true), b("b", false, true)}
	st := TrackTrust(names, nil, states, now)
	if st[0].NewSince != nil || st[0].Objects != 2 || st[0].HoldNew != 1 || st[0].HoldOld != 2 {
		t.Fatalf("status %+v", st[0])
	}
	if !states[0].NewSince.Equal(now) || !states[1].NewSince.IsZero() {
		t.Fatalf("object dates %v, %v: want now for the one that holds it, none for the other", states[0].NewSince, states[1].NewSince)
	}
	states = []State{b("a", true, true), b("b", true, true)}
	st = TrackTrust(names, st, states, now)
	want := t0.Add(time.Second) // rounded up: never earlier than the sighting
	if st[0].NewSince == nil || !st[0].NewSince.Time.Equal(want) || !states[1].NewSince.Equal(want) {
		t.Fatalf("status %+v, object %v: want dated %v", st[0], states[1].NewSince, want)
	}
	later := at(30)
	st = TrackTrust(names, st, []State{b("a", true, false), b("b", true, false)}, later)
	if !st[0].NewSince.Time.Equal(want) || st[0].OldGoneSince == nil || !st[0].OldGoneSince.Time.Equal(later) {
		t.Fatalf("status %+v", st[0])
	}
	errs := []State{b("a", true, false), {Object: b("b", false, false).Object, Err: "forbidden"}}
	st = TrackTrust(names, st, errs, later)
	if st[0].NewSince != nil || st[0].OldGoneSince != nil || st[0].Error != "ConfigMap b/ca key ca.crt: forbidden" {
		t.Fatalf("status %+v: an object not read undates the entry", st[0])
	}

	srv := []State{{Object: serverTLS, HoldsNew: true, LeafSHA256: "leafnew", LeafSerial: "0A"}}
	ss := TrackServers([]string{"ns/cp-tls"}, []string{""}, nil, srv, t0)
	if ss[0].IssuedBy != "new" || ss[0].NewSince == nil || !srv[0].NewSince.Equal(t0) || ss[0].Error != "" || ss[0].Serial != "0A" {
		t.Fatalf("server status %+v, object %+v", ss[0], srv[0])
	}
	ss = TrackServers([]string{"ns/cp-tls"}, []string{""}, ss, srv, later)
	if !ss[0].NewSince.Time.Equal(t0) {
		t.Fatalf("server date moved: %+v", ss[0])
	}
	if ss = TrackServers([]string{"ns/cp-tls", "ns/gone"}, []string{"", ""}, ss, srv, later); ss[1].Error != "not read" {
		t.Fatalf("missing server status %+v", ss[1])
	}
}

// TestConditions: one per step, True once done; a condition that keeps its
// status keeps its transition time.
func TestConditions(t *testing.T) {
	f := newFleet().pod("lib-client", at(-60), 0, HowVolume).reports("lib-client", Report{CAs: both})
	r := Take(f.in)
	conds := r.Conditions(nil, 3, at(1))
	if len(conds) != 3 {
		t.Fatalf("%d conditions", len(conds))
	}
	for i, want := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionFalse} {
		if c := conds[i]; c.Status != want || c.ObservedGeneration != 3 || c.Type != r.Steps[i].Name {
			t.Errorf("condition %d: %+v", i, c)
		}
	}
	conds = r.Conditions(conds, 4, at(2))
	if !conds[0].LastTransitionTime.Time.Equal(at(1)) || conds[0].ObservedGeneration != 4 {
		t.Errorf("unchanged condition %+v", conds[0])
	}
	if got := truncate(strings.Repeat("é", 3000), maxMessage); len(got) > maxMessage || !strings.HasSuffix(got, " …") {
		t.Errorf("truncated to %d bytes", len(got))
	}
}

// TestOnlyTheStragglersShownAreExplained: a census that keeps no consumer
// (the controller's, in mode Observe) comes to the very verdicts, counts
// and stragglers — their reasons included — as one that keeps every
// consumer and says why of each; the pods' order in the input does not
// matter, nor whether they come in one batch or several.
func TestOnlyTheStragglersShownAreExplained(t *testing.T) {
	f, _ := mixedFleet()
	for i := range v1alpha1.MaxStragglers + 3 {
		f.pod(fmt.Sprintf("sub-%03d", i), at(-60), 0, HowSubPath)
	}
	f.in.Acknowledged = func(p Pod) string {
		if p.Name == "env-old" {
			return "restarted by hand"
		}
		return ""
	}
	kept := Take(f.in)
	slices.Reverse(f.in.Pods)
	f.in.KeepConsumers = false
	streamed := Take(f.in)
	if streamed.Consumers != nil {
		t.Errorf("%d consumers kept without KeepConsumers", len(streamed.Consumers))
	}
	if kept.Counts != streamed.Counts || kept.Next != streamed.Next || kept.Summary != streamed.Summary || kept.Omitted != streamed.Omitted {
		t.Errorf("kept: %+v %q %q %d\nstreamed: %+v %q %q %d", kept.Counts, kept.Next, kept.Summary, kept.Omitted,
			streamed.Counts, streamed.Next, streamed.Summary, streamed.Omitted)
	}
	if !slices.Equal(kept.Steps, streamed.Steps) {
		t.Errorf("steps differ:\n kept %+v\n streamed %+v", kept.Steps, streamed.Steps)
	}
	if !slices.Equal(kept.Stragglers, streamed.Stragglers) || len(streamed.Stragglers) != v1alpha1.MaxStragglers {
		t.Errorf("stragglers differ (%d, %d):\n kept %+v\n streamed %+v", len(kept.Stragglers), len(streamed.Stragglers), kept.Stragglers, streamed.Stragglers)
	}
	for _, s := range streamed.Stragglers {
		if s.Reason == "" {
			t.Errorf("straggler %+v says not why", s)
		}
	}
	if kept.Counts.Pods != int32(len(f.in.Pods)) || kept.Counts.ByEvidence.Acknowledged != 1 {
		t.Errorf("counts %+v", kept.Counts)
	}

	// In batches of 7 pods, in the order of their names.
	slices.SortFunc(f.in.Pods, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
	tl := Begin(f.in)
	for batch := range slices.Chunk(f.in.Pods, 7) {
		tl.Add(batch, f.in.Reports, f.in.Served)
	}
	batched := tl.Result()
	if kept.Counts != batched.Counts || kept.Summary != batched.Summary || !slices.Equal(kept.Steps, batched.Steps) ||
		!slices.Equal(kept.Stragglers, batched.Stragglers) || kept.Omitted != batched.Omitted {
		t.Errorf("in batches: %+v %q %d stragglers (%d omitted)\nwhole: %+v %q %d (%d)", batched.Counts, batched.Summary, len(batched.Stragglers), batched.Omitted,
			kept.Counts, kept.Summary, len(kept.Stragglers), kept.Omitted)
	}
}
