package clusterview

import (
	"runtime/debug"
	"testing"
)

// TestSyncGCPercent: while a watcher's initial list is in, the garbage
// collector's target is syncGCPercent, unless it was lower or off; once every
// watcher of the process has listed, it is back to what it was. (Not
// parallel: the target is the process's.)
func TestSyncGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	gc := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	for _, tc := range []struct{ before, during int }{{100, syncGCPercent}, {80, syncGCPercent}, {10, 10}, {-1, -1}} {
		debug.SetGCPercent(tc.before)
		a, b := &Watcher{}, &Watcher{}
		a.lowerGC()
		b.lowerGC()
		if got := gc(); got != tc.during {
			t.Errorf("GOGC %d: %d while listing, want %d", tc.before, got, tc.during)
		}
		a.restoreGCLocked()
		a.restoreGCLocked() // once only
		if got := gc(); got != tc.during {
			t.Errorf("GOGC %d: %d while another watcher lists, want %d", tc.before, got, tc.during)
		}
		b.stopped()
		if got := gc(); got != tc.before {
			t.Errorf("GOGC %d: %d once listed, want it back", tc.before, got)
		}
	}
}
