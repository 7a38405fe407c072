package census

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
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
