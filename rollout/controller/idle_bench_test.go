package controller

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/hotcert/hotcert/internal/kubetest"
)

// BenchmarkIdle measures what a controller with nothing to do costs: API
// requests per minute and CPU seconds per minute of the controller process,
// after it has synced and adopted its workloads, with the production settings
// (all namespaces, ReferenceRules on, leader election with the binary's
// 15 s / 10 s / 2 s), and with leader election off to show its share. The
// window is a minute (-short: 15 s; HOTCERT_BENCH_IDLE_WINDOW sets it).
func BenchmarkIdle(b *testing.B) {
	window := time.Minute
	if testing.Short() {
		window = 15 * time.Second
	}
	if v := os.Getenv("HOTCERT_BENCH_IDLE_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	ns := env.NewNamespace(b)
	for i := range 10 {
		name := fmt.Sprintf("s%d", i)
		createSecret(b, secret(ns, name, map[string]string{"a": "1"}))
		create(b, deployment(ns, fmt.Sprintf("app%d", i), 0, envFrom(name, "a"), optIn))
	}
	for _, tc := range []struct {
		name string
		le   bool
	}{{"leader-election", true}, {"no-leader-election", false}} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				reqs, cpu := idleRun(b, ns, tc.le, window)
				perMin := func(v float64) float64 { return v / window.Minutes() }
				total := 0
				for _, n := range reqs {
					total += n
				}
				b.ReportMetric(perMin(float64(total)), "req/min")
				b.ReportMetric(perMin(cpu.Seconds()), "cpu-s/min")
				keys := make([]string, 0, len(reqs))
				for k := range reqs {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				var parts []string
				for _, k := range keys {
					parts = append(parts, fmt.Sprintf("%s %.1f", k, perMin(float64(reqs[k]))))
				}
				b.Logf("%s: %.1f requests/min (%s), %.3f CPU s/min over %s", tc.name, perMin(float64(total)), strings.Join(parts, ", "), perMin(cpu.Seconds()), window)
			}
		})
	}
}

// idleRun starts a controller of all namespaces, waits until it adopted the
// workloads of ns, then counts its API requests (by verb and resource) and
// the process's CPU time over window.
func idleRun(b *testing.B, ns string, leaderElection bool, window time.Duration) (map[string]int, time.Duration) {
	var mu sync.Mutex
	counting := false
	reqs := map[string]int{}
	rc := rest.CopyConfig(env.Config())
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return kubetest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			if counting {
				reqs[requestKind(r)]++
			}
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	o := testOptions()
	o.ReferenceRules = true
	c := startControllerWith(b, rc, "", o, func(mo *ctrlOptions) {
		if leaderElection {
			mo.LeaderElection, mo.LeaderElectionID, mo.LeaderElectionNamespace = true, "hotcert-idle-"+ns, ns
			mo.LeaderElectionReleaseOnCancel = true
			mo.LeaseDuration, mo.RenewDeadline, mo.RetryPeriod = ptr.To(15*time.Second), ptr.To(10*time.Second), ptr.To(2*time.Second)
		}
	})
	defer c.Stop()
	for i := range 10 {
		waitAdopted(b, ns, fmt.Sprintf("app%d", i))
	}
	time.Sleep(2 * time.Second) // the adoptions' own requests settle
	mu.Lock()
	counting = true
	mu.Unlock()
	start := cpuTime(b)
	time.Sleep(window) // the measurement: a controller left alone
	cpu := cpuTime(b) - start
	mu.Lock()
	counting = false
	defer mu.Unlock()
	return maps.Clone(reqs), cpu
}

// requestKind is "VERB resource" of an API request ("WATCH secrets", "PUT
// leases", "GET discovery").
func requestKind(r *http.Request) string {
	verb := r.Method
	if r.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	resource := "discovery"
	if i := slices.Index(parts, "namespaces"); i >= 0 && len(parts) > i+2 {
		resource = parts[i+2]
	} else if len(parts) >= 3 && (parts[0] == "api" && len(parts) == 3 || parts[0] == "apis" && len(parts) == 4) {
		resource = parts[len(parts)-1]
	}
	return verb + " " + resource
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
