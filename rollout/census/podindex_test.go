package census

import (
	"fmt"
	"slices"
	"testing"
)

// TestPodIndex: puts, removes, a namespace's relist and a drop keep each
// namespace's records sorted by name, one per pod, and the count right.
func TestPodIndex(t *testing.T) {
	rec := func(ns, name string) *podRecord { return &podRecord{podShape: &podShape{namespace: ns}, name: name} }
	names := func(ix *podIndex, ns string) []string {
		var out []string
		ix.each(ns, func(r *podRecord) { out = append(out, r.namespace+"/"+r.name) })
		if ns == "" {
			slices.Sort(out)
		}
		return out
	}
	ix := newPodIndex()
	for _, n := range []string{"c", "a", "b", "a"} {
		ix.put(rec("x", n))
	}
	ix.put(rec("y", "a"))
	if got, want := names(ix, "x"), []string{"x/a", "x/b", "x/c"}; !slices.Equal(got, want) || ix.len() != 4 || ix.lenOf("x") != 3 || ix.lenOf("") != 4 || ix.lenOf("z") != 0 {
		t.Fatalf("namespace x: %v (%d of x, %d in all), want %v (3 of x, 4 in all)", got, ix.lenOf("x"), ix.len(), want)
	}
	newer := rec("x", "b")
	ix.put(newer)
	found := false
	ix.each("x", func(r *podRecord) { found = found || r == newer })
	if !found || ix.len() != 4 {
		t.Fatalf("a pod's update did not replace its record (%d in all)", ix.len())
	}
	ix.remove("x", "a")
	ix.remove("x", "zz")
	ix.remove("nowhere", "a")
	if got, want := names(ix, "x"), []string{"x/b", "x/c"}; !slices.Equal(got, want) || ix.len() != 3 {
		t.Fatalf("after removes: %v (%d in all), want %v (3)", got, ix.len(), want)
	}
	// A relist of x: what it does not list is gone; the records of other
	// namespaces (a reflector of its own each) stay.
	ix.replace("x", []*podRecord{rec("x", "e"), rec("x", "d"), rec("y", "ignored")})
	if got, want := names(ix, ""), []string{"x/d", "x/e", "y/a"}; !slices.Equal(got, want) || ix.len() != 3 {
		t.Fatalf("after x's relist: %v (%d in all), want %v (3)", got, ix.len(), want)
	}
	// A relist of every namespace.
	var all []*podRecord
	for i := range 5 {
		all = append(all, rec(fmt.Sprint("n", i%2), fmt.Sprint("p", 4-i)))
	}
	ix.replace("", all)
	if got, want := names(ix, ""), []string{"n0/p0", "n0/p2", "n0/p4", "n1/p1", "n1/p3"}; !slices.Equal(got, want) || ix.len() != 5 {
		t.Fatalf("after a relist of all: %v (%d in all), want %v (5)", got, ix.len(), want)
	}
	// A streamed relist, in the order its events came: of a pod listed
	// twice the later record counts, and one whose later record is gone
	// (deleted during the list) is not kept.
	later, gone := rec("n0", "p2"), &podRecord{podShape: &podShape{namespace: "n0", gone: true}, name: "p0"}
	ix.replace("", []*podRecord{rec("n0", "p0"), rec("n0", "p2"), rec("n1", "p1"), later, gone, rec("n1", "p3")})
	if got, want := names(ix, ""), []string{"n0/p2", "n1/p1", "n1/p3"}; !slices.Equal(got, want) || ix.len() != 3 || ix.byNS["n0"][0] != later {
		t.Fatalf("after a streamed relist: %v (%d in all), want %v (3), n0/p2 its later record", got, ix.len(), want)
	}
	ix.remove("n0", "p2")
	ix.put(rec("n0", "p4"))
	ix.remove("n1", "p1")
	ix.remove("n1", "p3")
	if _, ok := ix.byNS["n1"]; ok {
		t.Fatal("an emptied namespace kept its entry")
	}
	ix.drop("n0")
	if ix.len() != 0 || len(ix.byNS) != 0 {
		t.Fatalf("after the drop: %d records, namespaces %v", ix.len(), ix.byNS)
	}
}
