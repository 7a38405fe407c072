package census

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// TestRollAfterWaitsForEveryTrustObject: a driven bundle that is a
// trust-manager Bundle's source changes before the Bundle's targets, which
// the consumers mount; a roll before the targets' change and the kubelet's
// delay would start them on the old content, and each is rolled once per
// step. The rolls of a step wait for the latest of its objects, and for
// every one of them to show it.
func TestRollAfterWaitsForEveryTrustObject(t *testing.T) {
	at := func(s int) *metav1.Time { m := metav1.NewTime(time.Unix(1_000_000+int64(s), 0)); return &m }
	delay := time.Second
	st := &v1alpha1.TrustRotationStatus{
		Trust: []v1alpha1.TrustObjectStatus{
			{Object: "ConfigMap cert-manager/cluster-ca-source key ca.crt", NewSince: at(0), OldGoneSince: at(10)},
			{Object: "Bundle cluster-ca", NewSince: at(1), OldGoneSince: at(12)},
		},
		ServerCertificates: []v1alpha1.ServerCertificateStatus{{Secret: "a/cp-tls", NewSince: at(5)}, {Secret: "b/cp-tls", NewSince: at(4)}},
	}
	got := rollAfter(st, delay)
	for step, want := range map[string]time.Time{v1alpha1.StepAddNewCA: at(2).Time, v1alpha1.StepRemoveOldCA: at(13).Time, v1alpha1.StepSwitchServerCert: at(6).Time} {
		if !got[step].Equal(want) {
			t.Errorf("%s: rolls after %s, want %s (the latest object's change, plus the delay)", step, got[step], want)
		}
	}

	// The targets do not show the change yet: no roll.
	st.Trust[1].NewSince, st.Trust[1].OldGoneSince, st.ServerCertificates[1].NewSince = nil, nil, nil
	if got := rollAfter(st, delay); len(got) != 0 {
		t.Errorf("rolls %v before every object shows the change", got)
	}
}

// TestStartingOnlyWhileContainersStart: a step is held for starting
// containers only when every consumer the census does not prove for it (or
// for a step before it) is a container that is not running; one running
// consumer that is not proven makes it a step undone.
func TestStartingOnlyWhileContainersStart(t *testing.T) {
	proven := core.Fact{Value: core.Yes, Evidence: v1alpha1.EvidenceReported}
	gone := core.Fact{Value: core.No, Evidence: v1alpha1.EvidenceRestarted}
	unknown := core.Fact{Evidence: v1alpha1.EvidenceUnknown, Why: "its container is not running"}
	running := []core.Start{core.StartOf("app", time.Unix(1_000_000, 0))}
	trust := func(started []core.Start, trustsNew, trustsOld core.Fact) core.Consumer {
		return core.Consumer{Pod: core.Pod{Namespace: "a", Name: "p", Started: started}, Use: core.Use{Container: "app"},
			Object: core.State{Object: core.Object{Role: core.RoleTrust}}, TrustsNew: trustsNew, TrustsOld: trustsOld}
	}
	server := core.Consumer{Pod: core.Pod{Started: running}, Use: core.Use{Container: "app"}, Object: core.State{Object: core.Object{Role: core.RoleServer}}, ServesNew: proven}
	st := &v1alpha1.TrustRotationStatus{}
	for _, step := range []string{v1alpha1.StepAddNewCA, v1alpha1.StepSwitchServerCert, v1alpha1.StepRemoveOldCA} {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: step, Status: metav1.ConditionFalse})
	}
	for _, c := range []struct {
		name      string
		consumers []core.Consumer
		want      map[string]bool
	}{
		{"a new pod of a roll, not running", []core.Consumer{server, trust(running, proven, gone), trust(nil, unknown, unknown)},
			map[string]bool{v1alpha1.StepAddNewCA: true, v1alpha1.StepSwitchServerCert: true, v1alpha1.StepRemoveOldCA: true}},
		{"and a running consumer not proven", []core.Consumer{server, trust(running, core.Fact{Value: core.No, Evidence: v1alpha1.EvidenceReported}, proven), trust(nil, unknown, unknown)},
			map[string]bool{v1alpha1.StepAddNewCA: false, v1alpha1.StepSwitchServerCert: false, v1alpha1.StepRemoveOldCA: false}},
		{"every consumer proven (another reason)", []core.Consumer{server, trust(running, proven, gone)},
			map[string]bool{v1alpha1.StepAddNewCA: false, v1alpha1.StepSwitchServerCert: false, v1alpha1.StepRemoveOldCA: false}},
	} {
		got := starting(&core.Result{Consumers: c.consumers}, st)
		for step, want := range c.want {
			if got[step] != want {
				t.Errorf("%s: %s starting %v, want %v", c.name, step, got[step], want)
			}
		}
	}
}
