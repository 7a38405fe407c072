package census_test

import (
	"context"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
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
	create(t, &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TrustRotationSpec{
		OldCA:       v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA:       v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust:       []v1alpha1.TrustObject{{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{Name: ctbName}}},
		Propagation: v1alpha1.Propagation{Volume: &metav1.Duration{Duration: time.Second}, ClusterTrustBundle: &metav1.Duration{Duration: 3 * time.Second}},
	}})
	t.Cleanup(func() {
		_ = env.Client().Delete(context.Background(), &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}})
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
