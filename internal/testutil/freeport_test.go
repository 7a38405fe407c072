package testutil

import (
	"net"
	"strconv"
	"testing"
)

func TestBandIsBesideTheEphemeralRange(t *testing.T) {
	for _, c := range []struct {
		elo, ehi, lo, n int
	}{
		{32768, 60999, 22768, 10000}, // Linux's default
		{49152, 65535, 39152, 10000}, // IANA's
		{5000, 65535, 1024, 3976},    // little room below, none above
		{1024, 50000, 50001, 10000},  // none below
		{1024, 65000, 0, 0},          // no room on either side
	} {
		lo, n := portBand(c.elo, c.ehi)
		if lo != c.lo || n != c.n {
			t.Errorf("portBand(%d, %d) = [%d, +%d), want [%d, +%d)", c.elo, c.ehi, lo, n, c.lo, c.n)
		}
		if n > 0 && lo+n-1 >= c.elo && lo <= c.ehi {
			t.Errorf("portBand(%d, %d) = [%d, +%d) overlaps the ephemeral range", c.elo, c.ehi, lo, n)
		}
	}
}

func TestTakeGivesDistinctListenablePortsOutsideTheEphemeralRange(t *testing.T) {
	elo, ehi := ephemeralRange()
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t, "127.0.0.1")
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		if lo, n := portBand(elo, ehi); n > 0 && (p < lo || p >= lo+n) {
			t.Fatalf("port %d is outside the band [%d, %d)", p, lo, lo+n)
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("listening on the port handed out: %v", err)
		}
		_ = ln.Close()
	}
}

func TestTakeSkipsAPortInUse(t *testing.T) {
	p := FreePort(t, "127.0.0.1")
	// The walk's next port, held: Take must pass over it.
	portWalk.Lock()
	held := portWalk.lo + portWalk.next
	portWalk.Unlock()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(held)))
	if err != nil {
		t.Skipf("port %d is held by another process already: %v", held, err)
	}
	defer ln.Close()
	q := FreePort(t, "127.0.0.1")
	if q == held || q == p {
		t.Fatalf("Take returned %d (held %d, previous %d)", q, held, p)
	}
}
