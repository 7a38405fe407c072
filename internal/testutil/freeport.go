package testutil

// The ports of FreePort come from outside the kernel's ephemeral port range.
// The usual way, listening on port 0 and closing the listener, returns a port
// from that range, where the kernel takes the local port of every outgoing
// connection and of every other ":0" listener: between the call and the
// program's own listen, an agent's reconnect can take it ("bind: address
// already in use", seen in CI). A port outside that range is handed out by
// nobody but FreePort: each process walks the band from a random start, so
// two test processes meet on one port only if their walks overlap and they
// take it in the same moment.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// portBandWidth is how many ports the band holds (fewer if the room beside the
// ephemeral range is smaller).
const portBandWidth = 10000

// minFreePort is the lowest port handed out: below it are the privileged ports.
const minFreePort = 1024

var portWalk struct {
	sync.Mutex
	lo, n, next int // the band is [lo, lo+n); next is the offset of the next port to try
	started     bool
}

// freePort returns a TCP port on ip that was free a moment ago and that the
// kernel gives no socket of its own choosing.
func freePort(ip string) (int, error) {
	portWalk.Lock()
	defer portWalk.Unlock()
	if !portWalk.started {
		portWalk.lo, portWalk.n = portBand(ephemeralRange())
		if portWalk.n > 0 {
			portWalk.next = rand.IntN(portWalk.n)
		}
		portWalk.started = true
	}
	for range portWalk.n {
		p := portWalk.lo + portWalk.next
		portWalk.next = (portWalk.next + 1) % portWalk.n
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("testutil: choosing a port: %w", err)
		}
		_ = ln.Close()
		return p, nil
	}
	// No band beside the ephemeral range, or every port of it is held: a
	// port of the kernel's choosing.
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("testutil: choosing a port: %w", err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// FreePort returns a TCP port on ip for a program the test or benchmark
// starts: free a moment ago, and one the kernel gives no socket of its own
// choosing. An error fails tb.
func FreePort(tb testing.TB, ip string) int {
	tb.Helper()
	p, err := freePort(ip)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// ephemeralRange is the kernel's ephemeral port range: Linux's
// net.ipv4.ip_local_port_range, else IANA's 49152–65535 (the BSDs' and
// macOS's default).
func ephemeralRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				return l, h
			}
		}
	}
	return 49152, 65535
}

// band is the ports handed out, [lo, lo+n), beside the ephemeral range
// [elo, ehi]: below it where there is room for a band, else above it; n is
// 0 where there is room on neither side.
func portBand(elo, ehi int) (lo, n int) {
	const enough = 1000
	if below := elo - minFreePort; below >= enough {
		n = min(below, portBandWidth)
		return elo - n, n
	}
	if above := 65535 - ehi; above >= enough {
		return ehi + 1, min(above, portBandWidth)
	}
	return 0, 0
}
