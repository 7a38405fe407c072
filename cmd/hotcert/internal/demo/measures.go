package demo

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// series is a list of durations measured over the whole run, in the order they were
// measured, so that a phase takes exactly its own: the ones measured between its
// start and its end (see mark and since).
type series struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *series) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

// mark returns the position a phase starting now measures from.
func (s *series) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}

// since returns a copy of what was measured from mark on.
func (s *series) since(mark int) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d[min(mark, len(s.d)):])
}

// percentile returns the nearest-rank q-quantile (0 < q ≤ 1) of d, 0 for none: the
// smallest value at least q of the values do not exceed. Of two values, p50 is the
// smaller and p99 the larger.
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// gaps measures how long each agent was without a stream: from the end of a stream
// (dropped, drained or forced) to the agent's next registered stream.
type gaps struct {
	mu        sync.Mutex
	downSince map[string]time.Time // by agent id: agents whose stream ended
	series
}

func newGaps() *gaps { return &gaps{downSince: map[string]time.Time{}} }

// ended records that agent id's stream ended at t.
func (g *gaps) ended(id string, t time.Time) {
	g.mu.Lock()
	g.downSince[id] = t
	g.mu.Unlock()
}

// connected records that agent id registered a stream at t; the time since its
// last stream ended, if one did, is a gap.
func (g *gaps) connected(id string, t time.Time) {
	g.mu.Lock()
	down, ok := g.downSince[id]
	delete(g.downSince, id)
	g.mu.Unlock()
	if ok {
		g.add(max(0, t.Sub(down)))
	}
}

// cpuProbe measures how long a goroutine that is due to run waits for a CPU: it
// sleeps for a period, again and again, and records how late it woke up. On a
// machine with CPU to spare that is well under a millisecond; when every core is
// busy (other programs, or the demo's own agents and replicas, which share this
// machine's CPUs), every goroutine of the demo waits about as long, handshakes and
// reconnects included.
type cpuProbe struct {
	period time.Duration
	series
}

// cpuBoundWait is the CPU wait (p99 over a phase) from which the summary says the
// phase was bound by the machine's CPU: a goroutine ready to run waited that long
// for a core in one probe out of a hundred.
const cpuBoundWait = 50 * time.Millisecond

// run probes until ctx is done.
func (p *cpuProbe) run(ctx context.Context) {
	t := time.NewTimer(p.period)
	defer t.Stop()
	for {
		due := time.Now().Add(p.period)
		t.Reset(p.period)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.add(max(0, time.Since(due)))
	}
}
