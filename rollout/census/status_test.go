package census_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

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
	name := configMapRotation(t, ns)
	createPod(t, ns, consumerPod{name: "a", vol: configMapVolume("ca"), started: time.Now().Add(-time.Hour)})

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
			return apiErrorResponse(t, req, apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("trustrotations").GroupResource(), name,
				errors.New("the object has been modified; please apply your changes to the latest version and try again"))), nil
		})
	})
	log, logs := capturedLog()
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
	if out := logs(); strings.Contains(out, "Reconciler error") || strings.Contains(out, "object has been modified") {
		t.Fatalf("the conflict was logged as an error:\n%s", out)
	}
}
