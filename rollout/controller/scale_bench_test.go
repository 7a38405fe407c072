package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hotcert/hotcert/hotcerttest"
)

// The scale benchmark's shape: its Secrets spread over scaleNamespaces
// namespaces, the 100 opted-in workloads and the Secrets they consume in the
// first, which alone carries scaleLabel (the selector matches 10% of the
// namespaces).
const (
	scaleNamespaces = 10
	scaleLabel      = "hotcert.dev/bench-scope"
)

// scaleSizes are the Secret counts measured, cumulatively in one cluster
// (HOTCERT_BENCH_SCALE="2000,10000" sets them; -short: 200).
func scaleSizes(b *testing.B) []int {
	spec := "2000,10000,50000"
	if testing.Short() {
		spec = "200"
	}
	if v := os.Getenv("HOTCERT_BENCH_SCALE"); v != "" {
		spec = v
	}
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < benchOptedIn {
			b.Fatalf("HOTCERT_BENCH_SCALE %q: want counts of at least %d", spec, benchOptedIn)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// scaleResult is one measurement of the real binary.
type scaleResult struct {
	secrets  int
	selector bool
	mem      memoryReport
	heapMiB  float64
	fileMiB  float64 // file-backed resident pages (the binary's own), from smaps_rollup
	p50, p99 time.Duration
}

// BenchmarkControllerScale measures the hotcert-controller binary (its
// default mode) at growing numbers of Secrets with the BenchmarkMemory shape
// (5% of them 200 KiB, like Helm release Secrets; 100 opted-in Deployments of
// 500), with no selector and with a namespace selector matching one namespace
// in ten: resident memory once synced (steady), its peak during the initial
// list, the Go heap, and the latency from a Secret update to the pod-template
// patch. It reports the goals as ratios between sizes of the same run.
// HOTCERT_BENCH_TSV=path writes the no-selector rows as a TSV file
// (docs/data/controller-scale.tsv).
func BenchmarkControllerScale(b *testing.B) {
	sizes := scaleSizes(b)
	samples, settle := 200, 5*time.Second
	if testing.Short() {
		samples, settle = 20, time.Second
	}
	bin := buildController(b)
	fx := newScaleFixture(b)
	var results []scaleResult
	for range b.N {
		results = results[:0]
		for _, n := range sizes {
			fx.grow(b, n)
			for _, sel := range []bool{false, true} {
				r := fx.measure(b, bin, sel, settle, samples)
				results = append(results, r)
				b.Logf("%6d Secrets, selector %-5v: RSS %5.1f MiB (file-backed %5.1f, anonymous %5.1f), peak %5.1f, heap %5.1f MiB, synced in %4.1fs; update→patch p50 %s, p99 %s",
					n, sel, r.mem.SettledRSSMiB, r.fileMiB, r.mem.AnonMiB, r.mem.PeakRSSMiB, r.heapMiB, r.mem.SyncSeconds,
					r.p50.Round(10*time.Microsecond), r.p99.Round(10*time.Microsecond))
			}
		}
	}
	reportScale(b, results)
	if path := os.Getenv("HOTCERT_BENCH_TSV"); path != "" {
		if err := writeScaleTSV(path, results); err != nil {
			b.Fatal(err)
		}
	}
}

// reportScale logs the goals, as ratios between the sizes of one run.
func reportScale(b *testing.B, results []scaleResult) {
	for _, sel := range []bool{false, true} {
		var rs []scaleResult
		for _, r := range results {
			if r.selector == sel {
				rs = append(rs, r)
			}
		}
		first, last := rs[0], rs[len(rs)-1]
		tag := map[bool]string{false: "all", true: "selector"}[sel]
		b.ReportMetric(last.mem.SettledRSSMiB, "MiB-rss-"+tag)
		b.ReportMetric(float64(last.p50.Microseconds())/1000, "ms-p50-"+tag)
		if len(rs) > 1 {
			per10k := (last.mem.SettledRSSMiB - first.mem.SettledRSSMiB) / (float64(last.secrets-first.secrets) / 10_000)
			flat := float64(last.p50) / float64(first.p50)
			b.Logf("%s: steady RSS grows %.2f MiB per 10k Secrets (goal ≤ 5: %s); p50 %d→%d Secrets ×%.2f (goal ≤ 1.2: %s)",
				tag, per10k, verdict(per10k <= 5), first.secrets, last.secrets, flat, verdict(flat <= 1.2))
		}
		for _, r := range rs {
			peak := r.mem.PeakRSSMiB / r.mem.SettledRSSMiB
			line := fmt.Sprintf("%s, %d Secrets: peak/steady RSS %.2f (goal ≤ 2: %s); p50 / 3.5 ms %.2f (goal ≤ 1: %s)",
				tag, r.secrets, peak, verdict(peak <= 2), float64(r.p50)/float64(3500*time.Microsecond), verdict(r.p50 <= 3500*time.Microsecond))
			if r.secrets == 10_000 {
				line += fmt.Sprintf("; steady RSS / 40 MiB %.2f (goal ≤ 1: %s)", r.mem.SettledRSSMiB/40, verdict(r.mem.SettledRSSMiB <= 40))
			}
			b.Log(line)
		}
	}
}

// writeScaleTSV writes the rows without a selector.
func writeScaleTSV(path string, results []scaleResult) error {
	var sb strings.Builder
	sb.WriteString("secrets\tsteady_rss_mib\tpeak_rss_mib\theap_mib\tp50_ms\tp99_ms\tfile_backed_mib\tanon_mib\tselector_steady_rss_mib\tselector_p50_ms\n")
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	for i, r := range results {
		if r.selector {
			continue
		}
		s := results[i+1] // the same size with the selector
		fmt.Fprintf(&sb, "%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f\t%.1f\t%.2f\n", r.secrets, r.mem.SettledRSSMiB, r.mem.PeakRSSMiB,
			r.heapMiB, ms(r.p50), ms(r.p99), r.fileMiB, r.mem.AnonMiB, s.mem.SettledRSSMiB, ms(s.p50))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

// scaleFixture is the cluster content of the scale benchmark, grown in place.
type scaleFixture struct {
	namespaces []string
	kubeconfig string
	leaves     []*hotcerttest.Leaf
	secrets    int
	cases      []rolloutCase
	round      int // the content round the next measurement starts at
}

func newScaleFixture(b *testing.B) *scaleFixture {
	fx := &scaleFixture{}
	ctx := context.Background()
	for i := range scaleNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "scale-"}}
		if i == 0 {
			ns.Labels = map[string]string{scaleLabel: "in"}
		}
		created, err := clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		fx.namespaces = append(fx.namespaces, created.Name)
	}
	dir := b.TempDir()
	fx.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(fx.kubeconfig, env.KubeConfig(), 0o600); err != nil {
		b.Fatal(err)
	}
	for range 10 {
		fx.leaves = append(fx.leaves, issue())
	}
	ns0 := fx.namespaces[0]
	fx.grow(b, benchOptedIn) // the consumed Secrets first
	for i := range benchDeployments {
		ns, name, spec, ann := ns0, fmt.Sprintf("opted-%03d", i), mountAll(fmt.Sprintf("ref-%03d", i)), optIn
		if i >= benchOptedIn {
			ns, name, spec, ann = fx.namespaces[i%scaleNamespaces], fmt.Sprintf("other-%03d", i), envFrom(fmt.Sprintf("small-%05d", i), "value"), nil
		}
		if err := env.Client().Create(ctx, deployment(ns, name, 0, spec, ann)); err != nil {
			b.Fatal(err)
		}
	}
	for ref := range benchOptedIn {
		fx.cases = append(fx.cases, rolloutCase{
			secret: fmt.Sprintf("ref-%03d", ref), workload: fmt.Sprintf("opted-%03d", ref),
			mutate: func(s *corev1.Secret, round int) {
				l := fx.leaves[(ref+1+fx.round+round)%len(fx.leaves)]
				s.Data["tls.crt"], s.Data["tls.key"] = l.ChainPEM, l.KeyPEM
			},
		})
	}
	return fx
}

// grow creates Secrets up to n in all: the consumed ones (the first
// benchOptedIn) in the first namespace, the others round-robin.
func (fx *scaleFixture) grow(b *testing.B, n int) {
	start, from := time.Now(), fx.secrets
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				ns := fx.namespaces[0]
				if i >= benchOptedIn {
					ns = fx.namespaces[i%scaleNamespaces]
				}
				s := benchSecret(&benchFixture{ns: ns, leaves: fx.leaves}, i)
				if _, err := clientset().CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	for i := from; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	fx.secrets = max(n, from)
	if n > from {
		b.Logf("%d Secrets: created %d in %s", n, n-from, time.Since(start).Round(time.Second))
	}
}

// measure runs the binary against the fixture, with or without the namespace
// selector, and measures its memory once synced and its update→patch latency.
func (fx *scaleFixture) measure(b *testing.B, bin string, selector bool, settle time.Duration, samples int) scaleResult {
	var args []string
	if selector {
		args = append(args, "--namespace-selector="+scaleLabel+"=in")
	}
	p := startBinary(b, fx.kubeconfig, bin, CacheReferenced, args...)
	defer p.stop()
	mem := p.settle(b, benchOptedIn, settle)
	r := scaleResult{secrets: fx.secrets, selector: selector, mem: mem}
	r.heapMiB = scrape(p.url, "go_memstats_heap_inuse_bytes") / (1 << 20)
	r.fileMiB = smapsFileMiB(b, p.cmd.Process.Pid)
	lat := updateToPatch(b, fx.namespaces[0], fx.cases, samples)
	fx.round += (samples-1)/len(fx.cases) + 1 // each update a change, in the next run too
	r.p50, r.p99 = percentile(lat, 50), percentile(lat, 99)
	return r
}

// smapsFileMiB reads the file-backed part of a process's resident memory.
func smapsFileMiB(b *testing.B, pid int) float64 {
	f, err := procMiB(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		b.Fatal(err)
	}
	return f["Rss"] - f["Anonymous"]
}
