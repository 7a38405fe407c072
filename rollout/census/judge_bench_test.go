package census

import (
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// BenchmarkJudge10kPods reports what judging 10,000 consumers of one
// ConfigMap allocates (the pod records built beforehand): consumers() and
// core's tally, the census's pure part, judgeBatch pods at a time as a
// census judges them, at the start of a rotation when every consumer is a
// straggler.
func BenchmarkJudge10kPods(b *testing.B) { benchmarkJudge(b, false) }

// BenchmarkJudge10kPodsKept is BenchmarkJudge10kPods as a driven rotation
// judges: every consumer kept, with why it is not proven.
func BenchmarkJudge10kPodsKept(b *testing.B) { benchmarkJudge(b, true) }

func benchmarkJudge(b *testing.B, keep bool) {
	const n = 10000
	rs := newRecords()
	records := make([]*podRecord, n)
	for i := range records {
		records[i] = rs.record(replicaPod(i))
	}
	since := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	states := []core.State{{Object: core.Object{Kind: core.KindConfigMap, Namespace: "team-a", Name: "ca", Key: "ca.crt"},
		HoldsNew: true, HoldsOld: true, NewSince: since}}
	objects := []core.Object{states[0].Object}
	b.ReportAllocs()
	for b.Loop() {
		t := core.Begin(core.Input{OldCA: core.CA{Name: "old"}, NewCA: core.CA{Name: "new"}, Objects: states, VolumeDelay: time.Minute, CTBDelay: time.Minute,
			KeepConsumers: keep})
		var c batch
		for records := range slices.Chunk(records, judgeBatch) {
			c.consumers(records, objects, keep)
			t.Add(c.pods, nil, nil)
		}
		if r := t.Result(); r.Counts.Total != n {
			b.Fatalf("%d consumers, want %d", r.Counts.Total, n)
		}
	}
}

// TestConsumersShareTheUsesOfAReplicaSet: the pods of one spec in one
// namespace are judged alike, and what they use is worked out once, not
// once per pod (per-pod allocations bounded; without the sharing each pod
// allocates its volumes' and uses' maps anew), and a pod certificate, which
// is each pod's own, is still matched pod by pod.
func TestConsumersShareTheUsesOfAReplicaSet(t *testing.T) {
	const n = 200
	rs := newRecords()
	var records []*podRecord
	for i := range n {
		p := replicaPod(i)
		if i%2 == 1 {
			p.Namespace = "team-b"
		}
		records = append(records, rs.record(p))
	}
	cm := core.Object{Kind: core.KindConfigMap, Namespace: "team-a", Name: "ca", Key: "ca.crt"}
	pc := core.Object{Kind: core.KindPodCertificate, Namespace: "team-a", Name: records[2].name, SignerName: "example.com/agents"}
	for _, objects := range [][]core.Object{{cm}, {cm, pc}} {
		var c batch
		c.consumers(records, objects, false)
		got, of := c.pods, c.records
		var want []core.Pod
		var p corev1.Pod
		for _, r := range records {
			r.fill(&p)
			if cp, ok := core.PodOf(&p, objects); ok {
				want = append(want, cp)
			}
		}
		if len(got) != len(want) || len(of) != len(want) || len(want) == 0 {
			t.Fatalf("objects %v: %d consumers (%d records), want %d", objects, len(got), len(of), len(want))
		}
		for i := range want {
			if of[i].name != got[i].Name || of[i].namespace != got[i].Namespace {
				t.Fatalf("objects %v: consumer %d is pod %s, its record %s/%s", objects, i, got[i].Key(), of[i].namespace, of[i].name)
			}
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("objects %v: pod %d:\n got %+v\nwant %+v", objects, i, got[i], want[i])
			}
		}
	}
	// What is allocated is the two slices and, per spec and namespace, its
	// uses (two shapes here: about 45 allocations, a few more with -race): a
	// single allocation per pod would make it more than n.
	if allocs := testing.AllocsPerRun(3, func() { new(batch).consumers(records, []core.Object{cm}, false) }); allocs > n/2 {
		t.Errorf("consumers of %d pods of one ReplicaSet allocates %.0f times, want none per pod (the pods' start times are slices of one)", n, allocs)
	}
}

// TestConsumersKeptKeepTheirStartTimes: the pods of a batch that the census
// keeps past it (a driven rotation's consumers, a revocation's pods) keep
// their start times when the next batch is made, which reuses the slices
// of one it does not keep.
func TestConsumersKeptKeepTheirStartTimes(t *testing.T) {
	rs := newRecords()
	var first, second []*podRecord
	for i := range 20 {
		if r := rs.record(replicaPod(i)); i < 10 {
			first = append(first, r)
		} else {
			second = append(second, r)
		}
	}
	objects := []core.Object{{Kind: core.KindConfigMap, Namespace: "team-a", Name: "ca", Key: "ca.crt"}}
	var c batch
	c.consumers(first, objects, true)
	kept := slices.Clone(c.pods)
	c.consumers(second, objects, true)
	var p corev1.Pod
	for i, r := range first {
		r.fill(&p)
		want, _ := core.PodOf(&p, objects)
		if !reflect.DeepEqual(kept[i].Started, want.Started) {
			t.Fatalf("kept pod %s started %v after the next batch, want %v", kept[i].Key(), kept[i].Started, want.Started)
		}
	}
}
