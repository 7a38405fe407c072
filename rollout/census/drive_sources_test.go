package census_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/internal/drive"
)

// ctbSigner is the signer of a driven ClusterTrustBundle test (one per
// test: a spec.trust entry naming a signer follows every pod projecting
// it); a signer-linked bundle's name starts with it, "/" written ":".
func ctbSigner(f *fleet) string { return "hotcert.dev/drive-" + f.ns }

// ctbFleet is a fleet whose consumers project the ClusterTrustBundles of
// its signer (as a projection by signer gets them: their union), which the
// kubelet the test plays delivers.
func ctbFleet(t *testing.T) (*fleet, string) {
	t.Helper()
	f := newFleet(t)
	name := "hotcert.dev:drive-" + f.ns + ":bundle"
	f.vol = &corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{
		SignerName: ptr.To(ctbSigner(f)), LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rotation": f.ns}}, Path: "ca.crt"}}}}}
	f.source = func(ctx context.Context) ([]byte, bool) {
		b := &certificatesv1.ClusterTrustBundle{}
		if env.Client().Get(ctx, client.ObjectKey{Name: name}, b) != nil {
			return nil, false
		}
		return []byte(b.Spec.TrustBundle), true
	}
	t.Cleanup(func() {
		_ = env.Client().Delete(context.Background(), &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return f, name
}

func (f *fleet) clusterTrustBundle(name string) *certificatesv1.ClusterTrustBundle {
	b := &certificatesv1.ClusterTrustBundle{}
	if err := env.Client().Get(testContext(f.t), client.ObjectKey{Name: name}, b); err != nil {
		f.t.Fatal(err)
	}
	return b
}

// ctbRotation drives the rotation over the ClusterTrustBundle name, which
// spec.trust follows by its signer (as the consumers project it), or by
// its name.
func (f *fleet) ctbRotation(name string, byName bool) {
	f.rotation(func(s *v1alpha1.TrustRotationSpec) {
		s.Trust = []v1alpha1.TrustObject{{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{SignerName: ctbSigner(f),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rotation": f.ns}}}}}
		if byName {
			s.Trust = []v1alpha1.TrustObject{{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{Name: name}}}
		}
		s.Propagation.ClusterTrustBundle = &metav1.Duration{Duration: time.Second}
		s.Drive.Bundle = v1alpha1.DriveBundle{ClusterTrustBundle: &v1alpha1.DriveClusterTrustBundle{Name: name, SignerName: ctbSigner(f)}}
	})
}

// TestDrivenRotationOfAClusterTrustBundle: a rotation driven over a
// signer-linked ClusterTrustBundle that the consumers project by signer:
// the controller publishes the union into it, switches the Certificate,
// then publishes the new CA alone, each write once, each step once the
// census proved the one before — a library consumer, a restart-only
// Deployment rolled after each write, a server handshaken with all along
// against what the projection delivers: no handshake fails.
func TestDrivenRotationOfAClusterTrustBundle(t *testing.T) {
	f, name := ctbFleet(t)
	create(t, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rotation": f.ns}},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: ctbSigner(f), TrustBundle: string(f.ca2025.CertPEM)}})
	b := f.ca2025.CertPEM
	f.bundle.Store(&b)
	f.libraryClient("lib", true)
	f.deployment("legacy", true)
	f.server()
	f.ctbRotation(name, false)
	runCensus(t)
	f.play("legacy")

	tr := waitRotation(t, f.name, "the union published", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil || drivePhase(tr) == v1alpha1.PhaseStopped
	})
	if drivePhase(tr) == v1alpha1.PhaseStopped {
		t.Fatalf("stopped: %s", tr.Status.Drive.Message)
	}
	if got := f.clusterTrustBundle(name).Spec.TrustBundle; got != string(hotcerttest.BundlePEM(f.ca2025, f.ca2026)) {
		t.Fatalf("the ClusterTrustBundle is not the union:\n%s", got)
	}
	tr = waitRotation(t, f.name, "the rotation complete", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseComplete || drivePhase(tr) == v1alpha1.PhaseStopped
	})
	if drivePhase(tr) != v1alpha1.PhaseComplete {
		t.Fatalf("stopped: %s", tr.Status.Drive.Message)
	}
	if got := f.clusterTrustBundle(name); got.Spec.TrustBundle != string(f.ca2026.CertPEM) || got.Spec.SignerName != ctbSigner(f) {
		t.Fatalf("the ClusterTrustBundle at the end: signer %q\n%s", got.Spec.SignerName, got.Spec.TrustBundle)
	}
	for _, c := range []string{"add-new-ca: ClusterTrustBundle " + name, "remove-old-ca: ClusterTrustBundle " + name} {
		if n := countEvents(t, f.name, drive.EventWrote, c); n != 1 {
			t.Errorf("%q written %d times", c, n)
		}
	}
	if f.issuerName() != "ca-2026" || f.restartCount.Load() != 2 {
		t.Fatalf("issuer %s, %d rolls", f.issuerName(), f.restartCount.Load())
	}
	if n := f.failed.Load(); n != 0 {
		t.Fatalf("%d of %d handshakes failed, the last: %s", n, f.handshakes.Load(), *f.lastFailure.Load())
	}
	t.Logf("ClusterTrustBundle rotation driven; %d handshakes, 0 failed", f.handshakes.Load())
}

// TestDrivenRotationPublishesAMissingClusterTrustBundle: a ClusterTrustBundle
// that does not exist yet is published holding both CAs (add-new-ca), and
// a dry run before names it in the plan and publishes nothing.
func TestDrivenRotationPublishesAMissingClusterTrustBundle(t *testing.T) {
	f, name := ctbFleet(t)
	f.ctbRotation(name, true)
	editRotation(t, f.name, func(s *v1alpha1.TrustRotationSpec) {
		s.Drive.DryRun = true
		s.Drive.Reissue = v1alpha1.Reissue{External: &v1alpha1.ExternalReissue{}}
	})
	runCensus(t)
	tr := waitRotation(t, f.name, "the plan", func(tr *v1alpha1.TrustRotation) bool { return drivePhase(tr) == v1alpha1.PhaseDryRun })
	if plan := strings.Join(tr.Status.Drive.Plan, "\n"); !strings.Contains(plan, "add-new-ca: write ClusterTrustBundle "+name+": add CA-2026 beside CA-2025") {
		t.Fatalf("plan:\n%s", plan)
	}
	time.Sleep(time.Second) // three censuses
	if err := env.Client().Get(testContext(t), client.ObjectKey{Name: name}, &certificatesv1.ClusterTrustBundle{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run published the ClusterTrustBundle (get: %v)", err)
	}
	editRotation(t, f.name, func(s *v1alpha1.TrustRotationSpec) { s.Drive.DryRun = false })
	waitRotation(t, f.name, "the union published", func(tr *v1alpha1.TrustRotation) bool {
		return stepOf(tr, v1alpha1.StepAddNewCA).Written != nil
	})
	got := f.clusterTrustBundle(name)
	if got.Spec.SignerName != ctbSigner(f) || !bytes.Equal([]byte(got.Spec.TrustBundle), hotcerttest.BundlePEM(f.ca2025, f.ca2026)) {
		t.Fatalf("published: signer %q\n%s", got.Spec.SignerName, got.Spec.TrustBundle)
	}
}

// TestDrivenRotationOfAClusterTrustBundleRollsBack: a server that does not
// pick up its new leaf holds switch-server-cert; rolled back, the
// Certificate gets its issuer back, and once its Secret holds a leaf of the
// old CA again, the ClusterTrustBundle is published without the new CA; no
// handshake fails.
func TestDrivenRotationOfAClusterTrustBundleRollsBack(t *testing.T) {
	f, name := ctbFleet(t)
	create(t, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"rotation": f.ns}},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: ctbSigner(f), TrustBundle: string(f.ca2025.CertPEM)}})
	b := f.ca2025.CertPEM
	f.bundle.Store(&b)
	f.libraryClient("lib", true)
	f.frozen.Store(true)
	f.server()
	f.ctbRotation(name, false)
	runCensus(t)
	f.play()
	waitRotation(t, f.name, "held at switch-server-cert", func(tr *v1alpha1.TrustRotation) bool {
		return drivePhase(tr) == v1alpha1.PhaseWaiting && tr.Status.Drive.Step == v1alpha1.StepSwitchServerCert &&
			len(tr.Status.ServerCertificates) == 1 && tr.Status.ServerCertificates[0].IssuedBy == "new"
	})
	if got := f.clusterTrustBundle(name).Spec.TrustBundle; got != string(hotcerttest.BundlePEM(f.ca2025, f.ca2026)) {
		t.Fatalf("the ClusterTrustBundle before the rollback:\n%s", got)
	}
	editRotation(t, f.name, func(s *v1alpha1.TrustRotationSpec) { s.Drive.Action = v1alpha1.ActionRollback })
	waitRotation(t, f.name, "rolled back", func(tr *v1alpha1.TrustRotation) bool { return drivePhase(tr) == v1alpha1.PhaseRolledBack })
	if got := f.clusterTrustBundle(name).Spec.TrustBundle; got != string(f.ca2025.CertPEM) || f.issuerName() != "ca-2025" {
		t.Fatalf("after the rollback: issuer %s, ClusterTrustBundle\n%s", f.issuerName(), got)
	}
	if n := f.failed.Load(); n != 0 {
		t.Fatalf("%d of %d handshakes failed, the last: %s", n, f.handshakes.Load(), *f.lastFailure.Load())
	}
}

// editRotation changes the rotation's spec as edit says, read afresh and
// retried while the controller writes its status in between.
func editRotation(t *testing.T, name string, edit func(*v1alpha1.TrustRotationSpec)) {
	t.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tr := rotation(t, name)
		edit(&tr.Spec)
		return env.Client().Update(testContext(t), tr)
	}); err != nil {
		t.Fatal(err)
	}
}
