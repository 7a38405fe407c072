package census

import (
	"cmp"
	"slices"
	"sync"
)

// podIndex holds the pod records by namespace: the census's only copy of
// the pods, filled by its pod feed (podfeed.go), read by every census. Each
// namespace's records are a slice sorted by name, not a map: about 9 bytes
// a pod where a map of them takes 44 (its slots, the empty ones, the keys'
// headers; BenchmarkPodRecords), at the cost of moving the pointers after
// the one that a pod's creation or deletion inserts or removes (80 KB in a
// namespace of 10,000).
type podIndex struct {
	mu    sync.RWMutex
	byNS  map[string][]*podRecord // namespace -> its records, by name
	count int
}

func newPodIndex() *podIndex { return &podIndex{byNS: map[string][]*podRecord{}} }

func byName(r *podRecord, name string) int { return cmp.Compare(r.name, name) }

func (ix *podIndex) put(r *podRecord) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rs := ix.byNS[r.namespace]
	i, found := slices.BinarySearchFunc(rs, r.name, byName)
	if found {
		rs[i] = r
		return
	}
	ix.byNS[r.namespace] = slices.Insert(rs, i, r)
	ix.count++
}

func (ix *podIndex) remove(namespace, name string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rs := ix.byNS[namespace]
	i, found := slices.BinarySearchFunc(rs, name, byName)
	if !found {
		return
	}
	ix.count--
	if len(rs) == 1 {
		delete(ix.byNS, namespace)
		return
	}
	ix.byNS[namespace] = slices.Delete(rs, i, i+1)
}

// replace makes rs the records of namespace ns (of every namespace for
// ""): a relist's answer, in the order it arrived: of several records of a
// pod the last counts, and a pod whose last record is gone is not kept. It
// takes rs.
func (ix *podIndex) replace(ns string, rs []*podRecord) {
	rs = slices.DeleteFunc(rs, func(r *podRecord) bool { return ns != "" && r.namespace != ns })
	// Stable, then the last of each run: a pod's later record wins.
	slices.SortStableFunc(rs, func(a, b *podRecord) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	kept := rs[:0]
	for i, r := range rs {
		if i+1 < len(rs) && rs[i+1].namespace == r.namespace && rs[i+1].name == r.name {
			continue
		}
		if !r.gone {
			kept = append(kept, r)
		}
	}
	clear(rs[len(kept):])
	rs = kept
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropLocked(ns)
	for len(rs) > 0 {
		n := 1
		for n < len(rs) && rs[n].namespace == rs[0].namespace {
			n++
		}
		// Each namespace's own array: one shared by several would keep the
		// records of a dropped namespace alive.
		ix.byNS[rs[0].namespace] = slices.Clone(rs[:n])
		ix.count += n
		rs = rs[n:]
	}
}

// drop forgets the records of namespace ns (of every namespace for "").
func (ix *podIndex) drop(ns string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.dropLocked(ns)
}

func (ix *podIndex) dropLocked(ns string) {
	if ns == "" {
		ix.byNS, ix.count = map[string][]*podRecord{}, 0
		return
	}
	ix.count -= len(ix.byNS[ns])
	delete(ix.byNS, ns)
}

// each calls f with every record of namespace ns (every namespace for ""),
// under the index's read lock: f must not block.
func (ix *podIndex) each(ns string, f func(*podRecord)) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if ns != "" {
		for _, r := range ix.byNS[ns] {
			f(r)
		}
		return
	}
	for _, rs := range ix.byNS {
		for _, r := range rs {
			f(r)
		}
	}
}

// lenOf is how many records namespace ns has (every namespace: "").
func (ix *podIndex) lenOf(ns string) int {
	if ns == "" {
		return ix.len()
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return len(ix.byNS[ns])
}

func (ix *podIndex) len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.count
}
