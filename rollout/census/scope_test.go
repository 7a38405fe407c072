package census_test

import (
	"context"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// TestCensusInANamespaceScope: a census restricted by a namespace selector
// (hotcert-controller's --namespace-selector) counts the pods of the
// matching namespaces only, says so in the summary, refuses to judge a
// ConfigMap named in a namespace out of scope, and counts a namespace from
// the census after it starts matching. The census keeps records of the
// pods in scope only, and forgets those of a namespace that stops matching.
func TestCensusInANamespaceScope(t *testing.T) {
	in, out := env.NewNamespace(t), env.NewNamespace(t)
	ctx := testContext(t)
	team := "team-" + in
	label := func(ns, team string) {
		t.Helper()
		n := &corev1.Namespace{}
		if err := env.Client().Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			t.Fatal(err)
		}
		n.Labels["team"] = team
		if err := env.Client().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	label(in, team)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	both := string(hotcerttest.BundlePEM(ca2025, ca2026))
	ctb := &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "agents-" + in}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: both}}
	create(t, ctb)
	t.Cleanup(func() { _ = env.Client().Delete(context.Background(), ctb) })
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: out, Name: "ca"}, Data: map[string]string{"ca.crt": both}})
	vol := corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To(ctb.Name), Path: "ca.crt"}}}}}
	longAgo := time.Now().Add(-time.Hour)
	createPod(t, in, consumerPod{name: "a", vol: vol, started: longAgo})
	createPod(t, out, consumerPod{name: "b", vol: vol, started: longAgo})
	name := "rot-" + in
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ClusterTrustBundle: &v1alpha1.ClusterTrustBundleRef{Name: ctb.Name}},
			{ConfigMap: &v1alpha1.ObjectKey{Namespace: out, Name: "ca", Key: "ca.crt"}}},
	})
	reg := startCensusWith(t, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond,
		NamespaceSelector: labels.SelectorFromSet(labels.Set{"team": team})})

	tr := waitRotation(t, name, "the census of the namespace in scope", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.ObservedGeneration == tr.Generation && len(tr.Status.Trust) == 2
	})
	if c := tr.Status.Consumers; c.Total != 1 || c.Pods != 1 || straggler(tr, "a") == nil || straggler(tr, "b") != nil {
		t.Fatalf("consumers %+v, stragglers %+v: only the pod of %s is in scope", c, tr.Status.Stragglers, in)
	}
	if want := "(counting the pods of namespaces matching team=" + team + " (1: " + in + ") only)"; !strings.HasSuffix(tr.Status.Summary, want) {
		t.Fatalf("summary %q, want it to end with %q", tr.Status.Summary, want)
	}
	if e := tr.Status.Trust[1].Error; !strings.Contains(e, "namespace "+out+" is outside the census's scope") {
		t.Fatalf("the ConfigMap out of scope: error %q", e)
	}

	label(out, team)
	tr = waitRotation(t, name, "the namespace that started matching counted", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.Total == 2 && tr.Status.Trust[1].Error == ""
	})
	if straggler(tr, "b") == nil {
		t.Fatalf("stragglers %+v", tr.Status.Stragglers)
	}
	if n := gaugeValue(t, reg, "hotcert_census_pods", ""); n != 2 {
		t.Fatalf("the census keeps %v pod records, want the 2 of the namespaces in scope", n)
	}

	label(in, "other")
	tr = waitRotation(t, name, "the namespace that stopped matching dropped", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.Consumers.Total == 1 && straggler(tr, "a") == nil && straggler(tr, "b") != nil
	})
	if n := gaugeValue(t, reg, "hotcert_census_pods", ""); n != 1 {
		t.Fatalf("the census keeps %v pod records, want the 1 of %s: those of %s are forgotten", n, out, in)
	}
}
