package census_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
	"github.com/hotcert/hotcert/rollout/api/v1alpha1"
)

// BenchmarkCensus10kPods measures the census of a TrustRotation whose
// ConfigMap 10,000 running pods mount (HOTCERT_BENCH_CENSUS_PODS sets the
// count; -short: 1,000). The pods run on fake nodes that kwok (make kwok)
// simulates against the tests' API server: kwok, as a kubelet would, makes
// them Running with a podIP and start times. The real hotcert-controller
// binary runs twice, without and with --census (every other flag alike): the
// memory the census adds is the difference of the two processes' resident
// memory (VmRSS, and its peak VmHWM) as the kubelet would see it, at rest
// after the same time and again after the runtime's next collection
// (afterCollection); the census's time to its first complete census from
// the process's start, the time from the ConfigMap's change to a census that
// shows it, and the API requests per minute of each process at rest (from
// its rest_client_requests_total, over 30s; census interval 15s).
// HOTCERT_BENCH_PAGES=1 logs what the census's process has more of its
// executable's pages resident at the measure: the package of the code in
// them (residentCode). HOTCERT_BENCH_PPROF_DIR names a folder for each
// process's heap profile at the measure (inuse and alloc, read with go tool
// pprof): the processes then serve /debug/pprof/ on loopback
// (--pprof-bind-address), both alike.
// The processes inherit GODEBUG (GODEBUG=memprofilerate=N for exacter
// profiles, gctrace=1 for each collection), which the log states when set.
func BenchmarkCensus10kPods(b *testing.B) {
	if v := os.Getenv("GODEBUG"); v != "" {
		b.Logf("GODEBUG=%s (the processes run with it)", v)
	}
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
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig(), 0o600); err != nil {
		b.Fatal(err)
	}
	node := startKwok(b, cl, kubeconfig, "kwok-"+ns)

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, Data: map[string]string{"ca.crt": string(ca2025.CertPEM)}}
	if err := cl.Create(ctx, cm); err != nil {
		b.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	createPods(b, cl, ns, node, n)
	b.Logf("%d pods created in %s", n, time.Since(start).Round(time.Second))
	waitRunning(b, cl, ns, n)
	b.Logf("%d pods Running (kwok) %s after the first was created", n, time.Since(start).Round(time.Second))

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
	bin := buildController(b)

	const settle = 30 * time.Second // from ready (or the census's first write after the change) to the measure
	for range b.N {
		base := startController(b, kubeconfig, bin)
		base.waitReady(b)
		time.Sleep(settle)
		baseReq := base.requestsPerMinute(b, 30*time.Second)
		baseMem := base.memory(b)
		basePages := base.codePages(b)
		base.heapProfile(b, "without-census")
		baseGC := base.afterCollection(b)
		base.stop()

		cen := startController(b, kubeconfig, bin, "--census")
		first := waitStatus(b, cl, name, func(s v1alpha1.TrustRotationStatus) bool { return s.Consumers.Total == int32(n) })
		firstAfterStart := time.Since(cen.start)
		cm.Data["ca.crt"] = string(hotcerttest.BundlePEM(ca2025, ca2026))
		if err := cl.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
		after := waitStatus(b, cl, name, func(s v1alpha1.TrustRotationStatus) bool {
			return len(s.Trust) == 1 && s.Trust[0].HoldNew == 1 && s.Consumers.Total == int32(n)
		})
		time.Sleep(settle)
		cenReq := cen.requestsPerMinute(b, 30*time.Second)
		cenMem := cen.memory(b)
		cenPages := cen.codePages(b)
		cen.heapProfile(b, "with-census")
		cenGC := cen.afterCollection(b)
		cen.stop()

		b.ReportMetric(firstAfterStart.Seconds(), "s/first-census")
		b.ReportMetric(after.Seconds(), "s/census-after-change")
		b.ReportMetric(cenMem.rss-baseMem.rss, "MiB-rss/census")
		b.ReportMetric(cenMem.anon-baseMem.anon, "MiB-anon-rss/census")
		b.ReportMetric(cenMem.peak-baseMem.peak, "MiB-peak-rss/census")
		b.ReportMetric(cenMem.heap-baseMem.heap, "MiB-heap/census")
		b.ReportMetric(cenGC.rss-baseGC.rss, "MiB-rss-after-gc/census")
		b.ReportMetric(cenReq, "API-requests/min-at-rest")
		b.ReportMetric(cenReq-baseReq, "API-requests/min-at-rest/census")
		logCodePages(b, basePages, cenPages)
		b.Logf("%d pods: first census %s after the process started (%s after this poll began), census %s after the change", n,
			firstAfterStart.Round(10*time.Millisecond), first.Round(10*time.Millisecond), after.Round(10*time.Millisecond))
		for _, r := range []struct {
			what string
			m    procMemory
			req  float64
		}{{"without the census", baseMem, baseReq}, {"with the census", cenMem, cenReq},
			{"the census adds", cenMem.minus(baseMem), cenReq - baseReq}} {
			b.Logf("%-18s RSS %6.1f MiB (anonymous %6.1f, file %6.1f; peak %6.1f), Go heap in use %5.1f MiB, %3.0f API requests/min at rest",
				r.what+":", r.m.rss, r.m.anon, r.m.file, r.m.peak, r.m.heap, r.req)
			b.Logf("%-18s Go heap free, not returned %5.1f MiB, stacks %5.1f MiB, the runtime's own %5.1f MiB", "", r.m.idle, r.m.stacks, r.m.runtime)
		}
		// One line: a benchmark's log keeps its first lines only.
		b.Logf("after the next collection at rest: RSS %.1f MiB without the census, %.1f with it: the census adds %.1f (heap in use %.1f, free not returned %.1f)",
			baseGC.rss, cenGC.rss, cenGC.rss-baseGC.rss, cenGC.heap-baseGC.heap, cenGC.idle-baseGC.idle)
		// The next round starts from the ConfigMap without the new CA.
		cm.Data["ca.crt"] = string(ca2025.CertPEM)
		if err := cl.Update(ctx, cm); err != nil {
			b.Fatal(err)
		}
	}
}

// kwokDir is the folder make kwok installs kwok and its stages into
// (.bin/kwok at the repository root).
func kwokDir(b *testing.B) string {
	b.Helper()
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, ".bin", "kwok", "kwok")); err == nil {
			return filepath.Join(dir, ".bin", "kwok")
		}
		if filepath.Dir(dir) == dir {
			b.Fatalf("kwok is not installed in .bin/kwok of any folder above %s: run `make kwok` (make bench does) at the repository root", wd)
		}
	}
}

// startKwok runs kwok against the API server of kubeconfig, managing one
// fake node, name, that it creates; it returns the node's name.
func startKwok(b *testing.B, cl client.Client, kubeconfig, name string) string {
	b.Helper()
	dir := kwokDir(b)
	args := []string{"--kubeconfig", kubeconfig, "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.0.0.0/16", "--node-ip=10.255.0.1", "--server-address=127.0.0.1:" + strconv.Itoa(testutil.FreePort(b, "127.0.0.1"))}
	stages, _ := filepath.Glob(filepath.Join(dir, "stages", "*.yaml"))
	for _, s := range stages {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(filepath.Join(dir, "kwok"), args...)
	logs, err := os.Create(filepath.Join(b.TempDir(), "kwok.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logs.Close()
	})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		Labels: map[string]string{"type": "kwok"}}}
	if err := cl.Create(context.Background(), node); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cl.Delete(context.Background(), node) })
	return name
}

// createPods creates n pods on node mounting ConfigMap ca, each with the
// projected token volume the API server gives a pod (its name is the pod's
// own), 32 at a time.
func createPods(b *testing.B, cl client.Client, ns, node string, n int) {
	b.Helper()
	var wg sync.WaitGroup
	jobs := make(chan int)
	var failed atomic.Value
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				token := fmt.Sprintf("kube-api-access-%05x", i)
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-7d9f-%05d", i),
					Labels: map[string]string{"app": "bench", "pod-template-hash": "7d9f"}},
					Spec: corev1.PodSpec{
						NodeName: node, ServiceAccountName: "default",
						Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1", VolumeMounts: []corev1.VolumeMount{
							{Name: "ca", MountPath: "/etc/ca"}, {Name: token, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
						Volumes: []corev1.Volume{{Name: "ca", VolumeSource: configMapVolume("ca")},
							{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
								{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To(int64(3607))}},
								{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
									Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
							}}}}},
					}}
				if err := cl.Create(context.Background(), p); err != nil {
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
}

// waitRunning waits until kwok has made n pods of ns Running with a podIP.
func waitRunning(b *testing.B, cl client.Client, ns string, n int) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		list := &corev1.PodList{}
		if err := cl.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			b.Fatal(err)
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && len(p.Status.ContainerStatuses) == 1 &&
				p.Status.ContainerStatuses[0].State.Running != nil {
				running++
			}
		}
		if running == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d pods Running after 10 minutes: is kwok running?", running, n)
		}
		time.Sleep(2 * time.Second)
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

// buildController builds the hotcert-controller binary for the benchmark.
func buildController(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "hotcert-controller")
	build := exec.Command("go", "build", "-o", bin, "github.com/hotcert/hotcert/cmd/hotcert-controller")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building hotcert-controller: %v\n%s", err, out)
	}
	return bin
}

// controllerProc is a running hotcert-controller.
type controllerProc struct {
	cmd                   *exec.Cmd
	metrics, ready, pprof string // pprof "" unless HOTCERT_BENCH_PPROF_DIR is set
	start                 time.Time
}

// startController runs bin against the cluster of kubeconfig with the extra
// arguments.
func startController(b *testing.B, kubeconfig, bin string, extra ...string) *controllerProc {
	b.Helper()
	mport, pport := testutil.FreePort(b, "127.0.0.1"), testutil.FreePort(b, "127.0.0.1")
	args := append([]string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--log-level=error",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", mport), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", pport)}, extra...)
	pprof := ""
	if os.Getenv("HOTCERT_BENCH_PPROF_DIR") != "" {
		addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(b, "127.0.0.1"))
		args, pprof = append(args, "--pprof-bind-address="+addr), "http://"+addr+"/debug/pprof/heap"
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	p := &controllerProc{cmd: cmd, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", mport), ready: fmt.Sprintf("http://127.0.0.1:%d/readyz", pport),
		pprof: pprof, start: time.Now()}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.stop)
	return p
}

func (p *controllerProc) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
}

// waitReady waits until the process's caches have synced.
func (p *controllerProc) waitReady(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := scraper.Get(p.ready) //nolint:gosec // loopback test endpoint
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("hotcert-controller never became ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// requestsPerMinute counts the process's API requests over d.
func (p *controllerProc) requestsPerMinute(b *testing.B, d time.Duration) float64 {
	b.Helper()
	before := p.scrapeSum(b, "rest_client_requests_total")
	time.Sleep(d)
	return (p.scrapeSum(b, "rest_client_requests_total") - before) * float64(time.Minute) / float64(d)
}

// scraper is the benchmark's HTTP client of the processes' endpoints. It
// asks for no compression: a scrape that accepts gzip makes promhttp keep a
// gzip writer (about 0.8 MB) in a pool that a collection may or may not
// have emptied when the memory is read, noise of the measuring in one
// process and not the other (seen in a heap profile at the measure).
var scraper = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// scrapeSum sums every series of metric name on the process's /metrics.
func (p *controllerProc) scrapeSum(b *testing.B, name string) float64 {
	b.Helper()
	resp, err := scraper.Get(p.metrics) //nolint:gosec // loopback test endpoint
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	sum, found := 0.0, false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("%s: %q", name, line)
		}
		sum, found = sum+v, true
	}
	if !found {
		b.Fatalf("no %s on %s", name, p.metrics)
	}
	return sum
}

// heapProfile saves the process's heap profile as HOTCERT_BENCH_PPROF_DIR/name.pb.gz
// (nothing without it).
func (p *controllerProc) heapProfile(b *testing.B, name string) {
	b.Helper()
	if p.pprof == "" {
		return
	}
	resp, err := scraper.Get(p.pprof) //nolint:gosec // loopback test endpoint
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("heap profile: %v (%s)", err, resp.Status)
	}
	path := filepath.Join(os.Getenv("HOTCERT_BENCH_PPROF_DIR"), name+".pb.gz")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		b.Fatal(err)
	}
	b.Logf("heap profile: %s", path)
}

// afterCollection waits for the runtime's next collection (at rest, the
// one the runtime forces every two minutes), then for the scavenger to
// return what the collection freed beyond its goal, and reads the memory
// then: the process at rest, its heap goal set by what is live at rest
// rather than by whatever was in flight at the last collection since its
// start (a census's first list of the pods, or a census being judged).
func (p *controllerProc) afterCollection(b *testing.B) procMemory {
	b.Helper()
	cycles := p.scrapeSum(b, "go_gc_duration_seconds_count")
	deadline := time.Now().Add(3 * time.Minute)
	for p.scrapeSum(b, "go_gc_duration_seconds_count") == cycles {
		if time.Now().After(deadline) {
			b.Fatal("no collection in 3 minutes")
		}
		time.Sleep(time.Second)
	}
	time.Sleep(10 * time.Second)
	return p.memory(b)
}

// procMemory is a process's memory, in MiB: as the kernel counts it, and
// the Go runtime's parts of the anonymous memory (its go_memstats_*): the
// heap's spans in use, its free spans not yet returned to the system, the
// goroutines' stacks, and the runtime's own (span and GC metadata, the rest).
type procMemory struct{ rss, anon, file, peak, heap, idle, stacks, runtime float64 }

func (m procMemory) minus(o procMemory) procMemory {
	return procMemory{m.rss - o.rss, m.anon - o.anon, m.file - o.file, m.peak - o.peak, m.heap - o.heap, m.idle - o.idle, m.stacks - o.stacks, m.runtime - o.runtime}
}

// memory reads the process's VmRSS and VmHWM, and its Go heap in use.
func (p *controllerProc) memory(b *testing.B) procMemory {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	var m procMemory
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb / 1024
		case "RssAnon:":
			m.anon = kb / 1024
		case "RssFile:":
			m.file = kb / 1024
		case "VmHWM:":
			m.peak = kb / 1024
		}
	}
	mib := func(name string) float64 { return p.scrapeSum(b, "go_memstats_"+name) / (1 << 20) }
	m.heap = mib("heap_inuse_bytes")
	m.idle = mib("heap_idle_bytes") - mib("heap_released_bytes")
	m.stacks = mib("stack_inuse_bytes")
	m.runtime = mib("mspan_inuse_bytes") + mib("mcache_inuse_bytes") + mib("gc_sys_bytes") + mib("other_sys_bytes") + mib("buck_hash_sys_bytes")
	return m
}
