package census

import (
	"fmt"
	"testing"
)

// BenchmarkTakeRevocation10kPods reports what judging a revocation over
// 10,000 consumers of one ConfigMap costs per census: every pod reports the
// list it enforces, half of them one the census has not seen revoke the
// entries (every one of those a straggler, with its sentence).
func BenchmarkTakeRevocation10kPods(b *testing.B) {
	const n = 10000
	f := newFleet()
	in := RevocationInput{Objects: f.in.Objects, Versions: map[string]bool{"v3": true}, Current: []string{"v3"}, Reports: map[string][]DenyReport{}}
	for i := range n {
		p := Pod{Namespace: "ns", Name: fmt.Sprintf("app-%d", i), Uses: []Use{{Container: "app", Object: 0, How: HowVolume}}}
		in.Pods = append(in.Pods, p)
		v := "v3"
		if i%2 == 1 {
			v = "v2"
		}
		in.Reports[p.Key()] = []DenyReport{{Container: "app", Component: "api", Version: v}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := TakeRevocation(in); r.Counts.Total != n || r.Proven {
			b.Fatalf("%+v", r.Counts)
		}
	}
}
