package census

import (
	"testing"
	"time"

	core "github.com/hotcert/hotcert/rollout/internal/census"
)

// BenchmarkJudge10kPods reports what judging 10,000 consumers of one
// ConfigMap allocates (the pod records built beforehand): consumers() and
// core.Take, the census's pure part, at the start of a rotation when every
// consumer is a straggler.
func BenchmarkJudge10kPods(b *testing.B) {
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
		pods, _ := consumers(records, objects)
		r := core.Take(core.Input{OldCA: core.CA{Name: "old"}, NewCA: core.CA{Name: "new"}, Objects: states, Pods: pods, VolumeDelay: time.Minute, CTBDelay: time.Minute})
		if r.Counts.Total == 0 {
			b.Fatal("no consumers")
		}
	}
}
