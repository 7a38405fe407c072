package census_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// TestCensusThatCannotListPodsSaysWhy: a controller whose RBAC lets it read
// everything the census needs but the list of pods (a ClusterRole without
// pods list, the mistake of a hand-written role) fails each census with
// the API server's refusal, named as the list of pods of every namespace,
// as soon as the refusal comes (not after the census's wait for the list),
// and counts it in hotcert_census_errors_total; it writes no status that
// claims a count of consumers.
func TestCensusThatCannotListPodsSaysWhy(t *testing.T) {
	ns := env.NewNamespace(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca2025.CertPEM)}})
	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
	})
	all := []string{"*"}
	cfg := env.NewRestrictedConfig(t, "census-without-pods-"+ns, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "namespaces", "events", "services", "endpoints"}, Verbs: all},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}, // no list, no watch
		{APIGroups: []string{"events.k8s.io", "discovery.k8s.io", "certificates.k8s.io", "coordination.k8s.io", "hotcert.dev", "trust.cert-manager.io"},
			Resources: all, Verbs: all},
	}, "")

	var mu sync.Mutex
	var logs strings.Builder
	log := funcr.NewJSON(func(line string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(line + "\n")
	}, funcr.Options{})
	reg := startCensusAs(t, cfg, log, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond})

	want := "census: " + name + ": listing the pods of every namespace: "
	testutil.WaitFor(t, "the census failing on the refused list", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), want)
	})
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, line := range strings.Split(out, "\n") {
		if i := strings.Index(line, want); i >= 0 {
			// A watch first: the reflector streams its first list (watch-list).
			if got := line[i+len(want):]; !strings.HasPrefix(got, "pods is forbidden: User") || !strings.Contains(got, "census-without-pods-"+ns) {
				t.Fatalf("the census failed with %q, want the API server's refusal", got)
			}
		}
	}
	if n, _ := metricValue(t, reg, "hotcert_census_errors_total", name); n < 1 {
		t.Fatalf("hotcert_census_errors_total{rotation=%q} %v, want the failed censuses counted", name, n)
	}
	tr := &v1alpha1.TrustRotation{}
	if err := env.Client().Get(testContext(t), client.ObjectKey{Name: name}, tr); err != nil {
		t.Fatal(err)
	}
	if tr.Status.ObservedGeneration != 0 || tr.Status.Consumers.Total != 0 {
		t.Fatalf("status %+v written by a census that could not list the pods", tr.Status)
	}
}
