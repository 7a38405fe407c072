package census_test

import (
	"context"
	clocktesting "k8s.io/utils/clock/testing"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// TestCensusOfAClusterTrustBundleProjection: a pod projecting a
// ClusterTrustBundle is judged against the projection's delay, not a
// volume's: a container started after the volume delay but before the
// projection's is still unknown.
func TestCensusOfAClusterTrustBundleProjection(t *testing.T) {
	ns := env.NewNamespace(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	ctbName := "agents-" + ns
	ctb := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: ctbName},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(hotcerttest.BundlePEM(ca2025, ca2026))}}
	create(t, ctb)
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), ctb) })
	createPod(t, ns, consumerPod{name: "projected", started: time.Now().Add(-time.Hour), vol: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To(ctbName), Path: "ca.crt"}}}}}})
	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA:       v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA:       v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust:       []v1alpha1.TrustObject{{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{Name: ctbName}}},
		Propagation: v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}, ClusterTrustBundle: &metav1.Duration{Duration: 3 * time.Second}},
	})
	startCensus(t)

	tr := waitRotation(t, name, "the projection's consumer", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.Total == 1 && tr.Status.Trust[0].NewSince != nil
	})
	since := tr.Status.Trust[0].NewSince.Time
	// Past the volume delay, within the projection's.
	started := since.Add(1500 * time.Millisecond)
	setStarted(t, ns, "projected", started)
	waitRotation(t, name, "the new start time seen, still unknown", func(tr *v1alpha1.TrustRotation) bool {
		s := straggler(tr, "projected")
		return s != nil && s.How == "clusterTrustBundle" && s.Evidence == v1alpha1.EvidenceUnknown &&
			strings.Contains(s.Reason, "started at "+started.UTC().Truncate(time.Second).Format(time.RFC3339)) && strings.Contains(s.Reason, "the kubelet takes up to 3s")
	})
	// Past the projection's delay.
	setStarted(t, ns, "projected", since.Add(3*time.Second))
	waitRotation(t, name, "add-new-ca done", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepAddNewCA)
		return c != nil && c.Status == metav1.ConditionTrue && tr.Status.Consumers.ByEvidence.Restarted == 1
	})
}

// TestCensusOfClusterTrustBundleSelectors: a TrustRotation names a signer's
// ClusterTrustBundles by selector; each pod projecting that signer's bundles
// gets the union of those its own selector matches, read from the API
// server: a pod whose selection lacks the new CA is named with it while a
// pod whose selection holds it is not, a projection without a selector
// (which selects nothing) consumes nothing, and once every selection holds
// the new CA the pods restarted after the projection's delay prove the step.
func TestCensusOfClusterTrustBundleSelectors(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := testContext(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	signer := "example.com/" + ns
	bundle := func(ring string, cas ...*hotcerttest.CA) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{
			ObjectMeta: metav1.ObjectMeta{Name: "example.com:" + ns + ":ring-" + ring, Labels: map[string]string{"ring": ring}},
			Spec:       certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: string(hotcerttest.BundlePEM(cas...))},
		}
	}
	ring1, ring2 := bundle("1", ca2025, ca2026), bundle("2", ca2025)
	for _, b := range []*certificatesv1.ClusterTrustBundle{ring1, ring2} {
		create(t, b)
		t.Cleanup(func() { _ = env.Client().Delete(context.Background(), b) })
	}
	project := func(sel *metav1.LabelSelector) corev1.VolumeSource {
		return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{
			SignerName: ptr.To(signer), LabelSelector: sel, Path: "ca.crt"}}}}}
	}
	longAgo := time.Now().Add(-time.Hour)
	createPod(t, ns, consumerPod{name: "ring-1", started: longAgo, vol: project(&metav1.LabelSelector{MatchLabels: map[string]string{"ring": "1"}})})
	createPod(t, ns, consumerPod{name: "ring-2", started: longAgo, vol: project(&metav1.LabelSelector{MatchLabels: map[string]string{"ring": "2"}})})
	createPod(t, ns, consumerPod{name: "no-selector", started: longAgo, vol: project(nil)})
	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{SignerName: signer,
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ring", Operator: metav1.LabelSelectorOpExists}}}}}},
		Propagation: v1alpha1.Propagation{ClusterTrustBundle: &metav1.Duration{Duration: time.Second}},
	})
	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	startCensusWith(t, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond, Clock: clk})

	tr := waitRotation(t, name, "the census of both selections", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.Total == 2 && straggler(tr, "ring-2") != nil
	})
	// The entry's own selection (ring exists), ring=1's and ring=2's.
	if st := tr.Status.Trust[0]; st.Objects != 3 || st.HoldNew != 2 || st.NewSince != nil {
		t.Fatalf("trust status %+v", st)
	}
	s2 := straggler(tr, "ring-2")
	if s2.Object != "the ClusterTrustBundles of signer "+signer+" matching ring=2" || s2.Evidence != v1alpha1.EvidenceRestarted ||
		s2.Reason != "the ClusterTrustBundles of signer "+signer+" matching ring=2 does not hold CA-2026" {
		t.Fatalf("ring-2 straggler %+v", s2)
	}
	if s1 := straggler(tr, "ring-1"); s1 == nil || s1.Evidence != v1alpha1.EvidenceUnknown || s1.Object != "the ClusterTrustBundles of signer "+signer+" matching ring=1" {
		t.Fatalf("ring-1 straggler %+v", s1)
	}
	if straggler(tr, "no-selector") != nil {
		t.Fatal("a projection without a selector, which selects nothing, is counted")
	}

	ring2.Spec.TrustBundle = string(hotcerttest.BundlePEM(ca2025, ca2026))
	if err := env.Client().Update(ctx, ring2); err != nil {
		t.Fatal(err)
	}
	tr = waitRotation(t, name, "every selection holds the new CA", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Trust[0].NewSince != nil
	})
	restart := afterDelay(clk, tr.Status.Trust[0].NewSince.Time, time.Second) // the rotation's declared delay
	setStarted(t, ns, "ring-1", restart)
	setStarted(t, ns, "ring-2", restart)
	waitRotation(t, name, "add-new-ca done", func(tr *v1alpha1.TrustRotation) bool {
		c := condition(tr, v1alpha1.StepAddNewCA)
		return c != nil && c.Status == metav1.ConditionTrue && tr.Status.Consumers.ByEvidence.Restarted == 2
	})
}
