package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/hotcert/hotcert/rollout"
	"github.com/hotcert/hotcert/rollout/internal/clusterview"
)

// helperEnv, when set to a SecretCache mode, makes the test binary run a
// controller process for the memory benchmark instead of the tests: it starts
// the controller with that cache mode, waits until
// it has synced and digested helperWantEnv referenced objects, and prints its
// memory as JSON.
const (
	helperEnv        = "HOTCERT_ROLLOUT_MEMORY_HELPER"
	helperKubeconfig = "HOTCERT_ROLLOUT_MEMORY_KUBECONFIG"
	helperWantEnv    = "HOTCERT_ROLLOUT_MEMORY_WANT"
)

// memoryReport is what a helper process prints.
type memoryReport struct {
	Mode          string  `json:"mode"`
	SettledRSSMiB float64 `json:"settled_rss_mib"` // VmRSS after sync (the helper's: once the initial reconciles are done; the binary's: 5 s after), as the process left it
	RSSMiB        float64 `json:"rss_mib"`         // VmRSS after sync, after a forced GC
	AnonMiB       float64 `json:"anon_mib"`        // its anonymous part (heap, stacks, runtime), without the binary's pages
	PeakRSSMiB    float64 `json:"peak_rss_mib"`    // VmHWM: the peak, during the initial list
	HeapInuseMiB  float64 `json:"heap_inuse_mib"`
	Goroutines    int     `json:"goroutines"`
	Digested      int     `json:"digested"`
	SyncSeconds   float64 `json:"sync_seconds"`
}

func runMemoryHelper() int {
	if err := memoryHelper(); err != nil {
		fmt.Fprintln(os.Stderr, "memory helper:", err)
		return 1
	}
	return 0
}

func memoryHelper() error {
	mode := os.Getenv(helperEnv)
	want, err := strconv.Atoi(os.Getenv(helperWantEnv))
	if err != nil {
		return fmt.Errorf("%s: %w", helperWantEnv, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", os.Getenv(helperKubeconfig))
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	o := Options{MinInterval: -1, MaxRollouts: -1, SecretCache: SecretCache(mode), Registerer: prometheus.NewRegistry()}
	if o.SecretCache == cacheFull {
		o.SecretCache, o.cacheEverything = "", true
	}
	ctl, err := New(o)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Logger:                 logr.Discard(),
		Cache:                  ctl.CacheOptions(),
		Client:                 ctl.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return err
	}
	if err := ctl.SetupWithManager(mgr); err != nil {
		return err
	}
	// The workloads whose reconcile has resolved what they consume.
	var mu sync.Mutex
	reconciled := map[string]bool{}
	ctl.shared.onLookup = func(workload string, _ clusterview.Key, _ *rollout.Object) {
		mu.Lock()
		defer mu.Unlock()
		reconciled[workload] = true
	}
	settled := func() bool {
		mu.Lock()
		n := len(reconciled)
		mu.Unlock()
		return n >= want && queuesEmpty(ctl.metrics.queue)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	wait := func(done func() bool, what func() string) error {
		for !done() {
			select {
			case err := <-errc:
				return fmt.Errorf("manager stopped: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Since(start) > 5*time.Minute {
				return fmt.Errorf("%s in 5 minutes", what())
			}
		}
		return nil
	}
	if err := wait(func() bool { return ctl.view.Store().Len() >= want }, func() string {
		return fmt.Sprintf("digested %d of %d objects", ctl.view.Store().Len(), want)
	}); err != nil {
		return err
	}
	synced := time.Since(start)
	// The initial reconciles are done: every opted-in workload reconciled,
	// no work queued.
	if err := wait(settled, func() string { return "the initial reconciles did not settle" }); err != nil {
		return err
	}
	settledRSS, _, _, err := procMemory()
	if err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, anon, hwm, err := procMemory()
	if err != nil {
		return err
	}
	if p := os.Getenv("HOTCERT_BENCH_HEAP_PROFILE"); p != "" {
		f, err := os.Create(p + "." + mode)
		if err == nil {
			_ = pprof.WriteHeapProfile(f)
			_ = f.Close()
		}
	}
	return json.NewEncoder(os.Stdout).Encode(memoryReport{
		Mode: mode, SettledRSSMiB: settledRSS, RSSMiB: rss, AnonMiB: anon, PeakRSSMiB: hwm,
		HeapInuseMiB: float64(ms.HeapInuse) / (1 << 20), Goroutines: runtime.NumGoroutine(),
		Digested: ctl.view.Store().Len(), SyncSeconds: synced.Seconds(),
	})
}

// queuesEmpty reports whether no controller of q's has work queued.
func queuesEmpty(q *queueDepth) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, length := range q.queues {
		if length() > 0 {
			return false
		}
	}
	return true
}

// procMemory reads VmRSS, RssAnon and VmHWM of this process, in MiB.
func procMemory() (rss, anon, hwm float64, err error) {
	f, err := procMiB("/proc/self/status")
	return f["VmRSS"], f["RssAnon"], f["VmHWM"], err
}

// procMiB reads a /proc file of "Name: value kB" lines (status,
// smaps_rollup) into MiB by name.
func procMiB(path string) (map[string]float64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[strings.TrimSuffix(f[0], ":")] = kb / 1024
		}
	}
	return out, nil
}
