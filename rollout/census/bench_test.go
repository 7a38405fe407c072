package census_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
	"github.com/hotcert/hotcert/rollout/census"
)

// countingTransport counts the requests a client makes.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// BenchmarkCensus10kPods measures the census of a TrustRotation whose
// ConfigMap 10,000 running pods mount (HOTCERT_BENCH_CENSUS_PODS sets the
// count; -short: 1,000), the pods written as a kubelet (or kwok) would:
// the time from the controller's start to the first complete census, the
// time from the ConfigMap's change to a census that shows it, the Go heap
// the controller adds (its reduced pod cache included; measured in process,
// with the heap before it started as the baseline), and its API requests per
// minute at rest (counted over 30s with the default interval of 15s).
func BenchmarkCensus10kPods(b *testing.B) {
	n := 10000
	if testing.Short() {
		n = 1000
	}
	if v := os.Getenv("HOTCERT_BENCH_CENSUS_PODS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("HOTCERT_BENCH_CENSUS_PODS %q: want a count", v)
		}
	}
	ctx := context.Background()
	ns := env.NewNamespace(b)
	ca2025 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2025"))
	ca2026 := hotcerttest.MustNewCA(hotcerttest.WithCommonName("CA-2026"))
	cfg := rest.CopyConfig(env.Config())
	cfg.QPS, cfg.Burst = 5000, 5000
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca2025.CertPEM)}}
	if err := cl.Create(ctx, cm); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	longAgo := metav1.NewTime(start.Add(-time.Hour))
	var wg sync.WaitGroup
	jobs := make(chan int)
	var failed atomic.Value
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%05d", i), Labels: map[string]string{"app": "bench"}},
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca"}}}},
						Volumes:    []corev1.Volume{{Name: "ca", VolumeSource: configMapVolume("ca")}},
					}}
				if err := cl.Create(ctx, p); err != nil {
					failed.Store(err)
					continue
				}
				p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.invalid/app:1",
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: longAgo}}}}}
				if err := cl.Status().Update(ctx, p); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d pods created and running in %s", n, time.Since(start).Round(time.Second))

	name := "bench-" + ns
	tr := &v1alpha1.TrustRotation{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TrustRotationSpec{
		OldCA: v1alpha1.CA{PEM: string(ca2025.CertPEM)},
		NewCA: v1alpha1.CA{PEM: string(ca2026.CertPEM)},
		Trust: []v1alpha1.TrustObject{{ConfigMap: &v1alpha1.ObjectKey{Namespace: ns, Name: "ca", Key: "ca.crt"}}},
	}}
	if err := cl.Create(ctx, tr); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cl.Delete(context.Background(), tr) })

	for range b.N {
		heapBefore := heapMiB()
		var requests atomic.Int64
		mcfg := rest.CopyConfig(env.Config())
		mcfg.QPS, mcfg.Burst = 50, 100 // hotcert-controller's defaults
		mcfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &requests} }
		c, err := census.New(census.Options{Registerer: prometheus.NewRegistry(), SkipNameValidation: true})
		if err != nil {
			b.Fatal(err)
		}
		mgr, err := ctrl.NewManager(mcfg, ctrl.Options{Scheme: env.Scheme(), Cache: c.CacheOptions(cache.Options{}),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.SetupWithManager(mgr); err != nil {
			b.Fatal(err)
		}
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mgr.Start(mctx) }()
		first := waitStatus(b, cl, name, func(s v1alpha1.TrustRotationStatus) bool { return s.Consumers.Total == int32(n) })
		b.ReportMetric(first.Seconds(), "s/first-census")
		heap := heapMiB() - heapBefore
		b.ReportMetric(heap, "MiB-heap/census")

		cm.Data["ca.crt"] = string(hotcerttest.BundlePEM(ca2025, ca2026))
		if err := cl.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
		changed := time.Now()
		waitStatus(b, cl, name, func(s v1alpha1.TrustRotationStatus) bool {
			return len(s.Trust) == 1 && s.Trust[0].HoldNew == 1 && s.Consumers.Total == int32(n)
		})
		after := time.Since(changed)
		b.ReportMetric(after.Seconds(), "s/census-after-change")

		time.Sleep(2 * time.Second) // let the census that saw the change finish its write
		requests.Store(0)
		rest := 30 * time.Second
		time.Sleep(rest)
		perMin := float64(requests.Load()) * float64(time.Minute) / float64(rest)
		b.ReportMetric(perMin, "API-requests/min-at-rest")
		b.Logf("%d pods: first census %s after start, census %s after the change, +%.1f MiB heap, %.0f API requests/min at rest",
			n, first.Round(10*time.Millisecond), after.Round(10*time.Millisecond), heap, perMin)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		// The next round starts from the ConfigMap without the new CA.
		cm.Data["ca.crt"] = string(ca2025.CertPEM)
		if err := cl.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
	}
}

// waitStatus polls the TrustRotation until cond holds and returns how long it
// took.
func waitStatus(b *testing.B, cl client.Client, name string, cond func(v1alpha1.TrustRotationStatus) bool) time.Duration {
	b.Helper()
	start := time.Now()
	for {
		tr := &v1alpha1.TrustRotation{}
		if err := cl.Get(context.Background(), client.ObjectKey{Name: name}, tr); err != nil {
			b.Fatal(err)
		}
		if cond(tr.Status) {
			return time.Since(start)
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("status never matched: %+v", tr.Status.Consumers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heapMiB is the live Go heap after a collection.
func heapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}
