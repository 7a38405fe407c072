package census

import (
	"hash/maphash"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// interner hands out one shared copy of equal values, so that the thousands
// of pods of one ReplicaSet hold one reduced spec and one label set between
// them. It holds its copies weakly: a value no pod record holds any more is
// collected, and its entry leaves the table with it (runtime.AddCleanup),
// so the table never outgrows what the records use.
type interner[T any] struct {
	seed  maphash.Seed
	hash  func(*maphash.Hash, *T)
	equal func(a, b *T) bool

	mu     sync.Mutex
	byHash map[uint64][]weak.Pointer[T]
}

func newInterner[T any](hash func(*maphash.Hash, *T), equal func(a, b *T) bool) *interner[T] {
	return &interner[T]{seed: maphash.MakeSeed(), hash: hash, equal: equal, byHash: map[uint64][]weak.Pointer[T]{}}
}

// interned is one entry of the table, for its cleanup.
type interned[T any] struct {
	sum uint64
	w   weak.Pointer[T]
}

// intern returns the shared copy of a value equal to *v, making v that copy
// when there is none. v must not be changed afterwards.
func (in *interner[T]) intern(v *T) *T {
	var h maphash.Hash
	h.SetSeed(in.seed)
	in.hash(&h, v)
	sum := h.Sum64()
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, w := range in.byHash[sum] {
		if p := w.Value(); p != nil && in.equal(p, v) {
			return p
		}
	}
	w := weak.Make(v)
	in.byHash[sum] = append(in.byHash[sum], w)
	runtime.AddCleanup(v, in.forget, interned[T]{sum, w})
	return v
}

// forget drops the entry of a collected value.
func (in *interner[T]) forget(e interned[T]) {
	in.mu.Lock()
	defer in.mu.Unlock()
	ws := slices.DeleteFunc(in.byHash[e.sum], func(w weak.Pointer[T]) bool { return w == e.w })
	if len(ws) == 0 {
		delete(in.byHash, e.sum)
		return
	}
	in.byHash[e.sum] = ws
}

// len is the number of values in the table (collected ones whose cleanup has
// not run yet included).
func (in *interner[T]) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for _, ws := range in.byHash {
		n += len(ws)
	}
	return n
}
