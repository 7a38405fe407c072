package census_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// TestAChangeTriggersACensus: with an interval of an hour, a change of the
// trust object is in the status at once (its name-selected metadata watch
// wakes the rotation).
func TestAChangeTriggersACensus(t *testing.T) {
	ns := env.NewNamespace(t)
	ctx := testContext(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca2025.CertPEM)}}
	create(t, cm)
	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
	})
	startCensusWith(t, census.Options{Interval: time.Hour, MinSpacing: 50 * time.Millisecond})
	waitRotation(t, name, "the first census", func(tr *v1alpha1.TrustRotation) bool {
		return len(tr.Status.Trust) == 1 && tr.Status.Trust[0].HoldOld == 1 && tr.Status.Trust[0].HoldNew == 0
	})
	cm.Data["ca.crt"] = string(hotcerttest.BundlePEM(ca2025, ca2026))
	if err := env.Client().Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	waitRotation(t, name, "the change in the status", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Trust[0].HoldNew == 1
	})
	t.Logf("the change was in the status %s after it was written", time.Since(changed).Round(10*time.Millisecond))
}
