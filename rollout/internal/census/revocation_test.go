package census

import (
	"strings"
	"testing"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// revocationFleet is one of every kind of consumer a revocation meets, on the
// objects of newFleet (0 and 1 carry the trust, 2 is a server certificate),
// with the ground truth: each consumer's evidence and state.
func revocationFleet() (RevocationInput, map[string][2]string) {
	f := newFleet().
		pod("refused", at(-60), 0, HowVolume).
		pod("connections-left", at(-60), 0, HowVolume).
		pod("silent-connections", at(-60), 0, HowVolume).
		pod("old-list", at(-60), 1, HowClusterTrustBundle).
		pod("two-components", at(-60), 0, HowVolume).
		pod("reports-nothing", at(-60), 0, HowSubPath).
		pod("anonymous", at(-60), 0, HowVolume).
		pod("server-only", at(-60), 2, HowVolume) // serves, verifies no peer: not a consumer
	in := RevocationInput{Objects: f.in.Objects, Pods: f.in.Pods, Versions: map[string]bool{"v2": true, "v3": true}, Current: []string{"v3"},
		Reports: map[string][]DenyReport{
			"ns/refused":            {{Container: "app", Component: "api", Version: "v3", Denied: 0}},
			"ns/connections-left":   {{Container: "app", Component: "api", Version: "v3", Denied: 2}},
			"ns/silent-connections": {{Container: "app", Component: "client", Version: "v2", Denied: -1}},
			"ns/old-list":           {{Container: "app", Component: "api", Version: "v1", Denied: 0}},
			"ns/two-components":     {{Container: "app", Component: "api", Version: "v3", Denied: 0}, {Container: "app", Component: "admin", Version: "v1", Denied: 0}},
			"ns/anonymous":          {{Component: "api", Version: "v2", Denied: 0}},
			"ns/server-only":        {{Container: "app", Component: "api", Version: "v1", Denied: 5}},
		}}
	rep, unk := v1alpha1.EvidenceReported, v1alpha1.EvidenceUnknown
	return in, map[string][2]string{
		"refused":            {rep, v1alpha1.RevocationRefused},
		"connections-left":   {rep, v1alpha1.RevocationConnectionsLeft},
		"silent-connections": {rep, v1alpha1.RevocationConnectionsLeft},
		"old-list":           {rep, v1alpha1.RevocationNotRefused},
		"two-components":     {rep, v1alpha1.RevocationNotRefused},
		"reports-nothing":    {unk, v1alpha1.RevocationUnknown},
		"anonymous":          {rep, v1alpha1.RevocationRefused},
	}
}

// TestRevocationMatchesGroundTruth: each consumer of the trust is judged by
// what its processes report and no more; a pod that only serves is not one.
func TestRevocationMatchesGroundTruth(t *testing.T) {
	in, truth := revocationFleet()
	r := TakeRevocation(in)
	if len(r.Consumers) != len(truth) {
		t.Fatalf("%d consumers, want %d: %+v", len(r.Consumers), len(truth), r.Consumers)
	}
	for _, c := range r.Consumers {
		want, ok := truth[c.Pod.Name]
		if !ok {
			t.Errorf("%s counted as a consumer", c.Pod.Name)
			continue
		}
		if c.Evidence != want[0] || c.State != want[1] || c.Reason == "" {
			t.Errorf("%s: %s/%s (%s), want %s/%s", c.Pod.Name, c.Evidence, c.State, c.Reason, want[0], want[1])
		}
	}
	want := v1alpha1.RevocationCounts{Pods: 7, Total: 7, ByEvidence: v1alpha1.RevocationEvidenceCounts{Reported: 6, Unknown: 1},
		ByState: v1alpha1.RevocationStateCounts{Refused: 2, ConnectionsLeft: 2, NotRefused: 2}, DeniedConnections: 2}
	if r.Counts != want {
		t.Errorf("counts %+v, want %+v", r.Counts, want)
	}
	if r.Proven || r.Reason != v1alpha1.ReasonInProgress || len(r.Stragglers) != 5 {
		t.Fatalf("verdict %v %s (%s), %d stragglers", r.Proven, r.Reason, r.Message, len(r.Stragglers))
	}
	if s := r.Stragglers[len(r.Stragglers)-1]; s.Pod != "reports-nothing" || s.How != "subPath" || s.Step != v1alpha1.ConditionRevocationEnforced {
		t.Errorf("the unknown consumer is not named last: %+v", s)
	}
	for _, s := range r.Stragglers {
		if s.Pod == "old-list" && (s.Reason != "enforces deny list v1 (component api), which the census has not seen revoke every entry (an older list, or one read from other keys or objects); the deny-list objects hold v3" ||
			s.Object != "ClusterTrustBundle agents-2026") {
			t.Errorf("old-list straggler %+v", s)
		}
		if s.Pod == "connections-left" && !strings.Contains(s.Reason, "2 open connections its list denies are left") {
			t.Errorf("connections-left straggler %+v", s)
		}
	}
}

// TestRevocationVerdict: reported consumers still moving keep it in
// progress; once only unknown ones are left it is unproven, until they are
// acknowledged; an empty or shrunken fleet never proves it; a census without
// reports proves nothing.
func TestRevocationVerdict(t *testing.T) {
	fleet := func() RevocationInput {
		f := newFleet().pod("a", at(-60), 0, HowVolume).pod("b", at(-60), 0, HowVolume)
		return RevocationInput{Objects: f.in.Objects, Pods: f.in.Pods, Versions: map[string]bool{"v3": true},
			Reports: map[string][]DenyReport{"ns/a": {{Container: "app", Version: "v3"}}, "ns/b": {{Container: "app", Version: "v1"}}}}
	}
	in := fleet()
	if r := TakeRevocation(in); r.Proven || r.Reason != v1alpha1.ReasonInProgress {
		t.Fatalf("b on an old list: %v %s", r.Proven, r.Reason)
	}
	delete(in.Reports, "ns/b")
	r := TakeRevocation(in)
	if r.Proven || r.Reason != v1alpha1.ReasonUnproven || !strings.Contains(r.Message, "pod ns/b container app") {
		t.Fatalf("b reports nothing: %v %s (%s)", r.Proven, r.Reason, r.Message)
	}
	in.Acknowledged = func(p Pod) string {
		if p.Name == "b" {
			return "checked by hand"
		}
		return ""
	}
	if r := TakeRevocation(in); !r.Proven || r.Reason != v1alpha1.ReasonDone || r.Counts.ByEvidence.Acknowledged != 1 ||
		r.Message != "refused by all 2 consumers (1 reported, 1 acknowledged) and no connection their lists deny is left" {
		t.Fatalf("b acknowledged: %v %s (%s)", r.Proven, r.Reason, r.Message)
	}
	in.MinConsumers = 3
	if r := TakeRevocation(in); r.Proven || !strings.Contains(r.Message, "fewer than minConsumers (3)") {
		t.Fatalf("a shrunken fleet: %v (%s)", r.Proven, r.Message)
	}
	in.Pods, in.MinConsumers = nil, 0
	if r := TakeRevocation(in); r.Proven || r.Reason != v1alpha1.ReasonInProgress {
		t.Fatalf("no consumer: %v %s", r.Proven, r.Reason)
	}
	// What the objects hold comes first: a list that does not revoke an
	// entry, or cannot be judged, proves nothing whatever consumers report.
	in.Unlisted = []string{"ConfigMap ns/revoked (version v1) does not revoke serial 0A issuer ab"}
	if r := TakeRevocation(in); r.Proven || r.Reason != v1alpha1.ReasonNotListed || r.Message != in.Unlisted[0] {
		t.Fatalf("an entry not listed: %v %s (%s)", r.Proven, r.Reason, r.Message)
	}
	in.Broken = []string{"ConfigMap ns/revoked: not found"}
	if r := TakeRevocation(in); r.Proven || r.Reason != v1alpha1.ReasonInvalid || !strings.Contains(r.Message, "not found") {
		t.Fatalf("an object that cannot be read: %v %s (%s)", r.Proven, r.Reason, r.Message)
	}
	in = fleet()
	in.NoReports = "Prometheus could not be read"
	if r := TakeRevocation(in); r.Proven || r.Counts.ByEvidence.Unknown != 2 || r.Stragglers[0].Reason != "Prometheus could not be read" {
		t.Fatalf("no reports: %+v", r)
	}
}

// TestRevocationAnonymousReports: series that name no container speak for a
// pod only when one of its containers consumes the trust.
func TestRevocationAnonymousReports(t *testing.T) {
	f := newFleet().pod("p", at(-60), 0, HowVolume)
	f.in.Pods[0].Uses = append(f.in.Pods[0].Uses, Use{Container: "sidecar", Object: 1, How: HowVolume})
	in := RevocationInput{Objects: f.in.Objects, Pods: f.in.Pods, Versions: map[string]bool{"v3": true},
		Reports: map[string][]DenyReport{"ns/p": {{Version: "v3"}}}}
	r := TakeRevocation(in)
	if r.Counts.Total != 2 || r.Counts.ByEvidence.Unknown != 2 || !strings.Contains(r.Consumers[0].Reason, "more than one of its containers") {
		t.Fatalf("%+v", r.Consumers)
	}
}
