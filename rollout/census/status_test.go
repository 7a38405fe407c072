package census_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/kubetest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// TestCensusRetriesAStatusWriteThatConflicts: a status write the API server
// refuses with a conflict (the rotation changed since the cache's copy, or
// the cache has not seen the census's own last write yet, as happens when
// two censuses follow each other closely) is taken again on a fresh copy:
// the status is written, and the conflict is neither a failed census
// (hotcert_census_errors_total) nor an error in the log.
func TestCensusRetriesAStatusWriteThatConflicts(t *testing.T) {
	ns := env.NewNamespace(t)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca2025.CertPEM)}})
	createPod(t, ns, consumerPod{name: "a", vol: configMapVolume("ca"), started: time.Now().Add(-time.Hour)})
	name := "rot-" + ns
	createRotation(t, name, v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
	})

	// The first write of the status is answered as the API server answers
	// a stale resourceVersion.
	var conflicts atomic.Int32
	path := "/apis/hotcert.dev/v1alpha1/trustrotations/" + name + "/status"
	cfg := rest.CopyConfig(env.Config())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return kubetest.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPut || req.URL.Path != path || !conflicts.CompareAndSwap(0, 1) {
				return rt.RoundTrip(req)
			}
			body := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on trustrotations.hotcert.dev \"` + name +
				`\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"` + name +
				`","group":"hotcert.dev","kind":"trustrotations"},"code":409}`
			return &http.Response{StatusCode: http.StatusConflict, Status: "409 Conflict", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		})
	})
	var mu sync.Mutex
	var logs strings.Builder
	log := funcr.NewJSON(func(line string) {
		mu.Lock()
		defer mu.Unlock()
		logs.WriteString(line + "\n")
	}, funcr.Options{})
	reg := startCensusAs(t, cfg, log, census.Options{Interval: 300 * time.Millisecond, MinSpacing: 50 * time.Millisecond})

	waitRotation(t, name, "the status written after the conflict", func(tr *v1alpha1.TrustRotation) bool {
		return tr.Status.ObservedGeneration == tr.Generation && tr.Status.Consumers.Total == 1
	})
	if conflicts.Load() != 1 {
		t.Fatal("the census's status write was never answered with the conflict")
	}
	if n, _ := metricValue(t, reg, "hotcert_census_errors_total", name); n != 0 {
		t.Fatalf("hotcert_census_errors_total{rotation=%q} %v: a conflict counted as a failed census", name, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if out := logs.String(); strings.Contains(out, "Reconciler error") || strings.Contains(out, "object has been modified") {
		t.Fatalf("the conflict was logged as an error:\n%s", out)
	}
}
