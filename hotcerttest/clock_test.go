package hotcerttest_test

import (
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

var _ hotcert.Clock = (*hotcerttest.FakeClock)(nil)

// TestFakeClock: a function runs once the clock is advanced to its time, never
// before, never after being stopped; a due time runs at once.
func TestFakeClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := hotcerttest.NewFakeClock(start)
	fired := make(chan string, 4)
	c.AfterFunc(time.Hour, func() { fired <- "hour" })
	stop := c.AfterFunc(2*time.Hour, func() { fired <- "stopped" })
	c.AfterFunc(0, func() { fired <- "now" })
	if got := <-fired; got != "now" {
		t.Fatalf("fired %q first, want the due one", got)
	}
	c.Advance(59 * time.Minute)
	if c.Waiting() != 2 || !c.Now().Equal(start.Add(59*time.Minute)) {
		t.Fatalf("after 59 min: %d waiting at %v", c.Waiting(), c.Now())
	}
	c.Advance(time.Minute)
	if got := <-fired; got != "hour" {
		t.Fatalf("fired %q at one hour", got)
	}
	if !stop() || stop() {
		t.Fatal("stop: want true once, then false")
	}
	c.Advance(2 * time.Hour)
	if c.Waiting() != 0 {
		t.Fatalf("%d still waiting", c.Waiting())
	}
	select {
	case got := <-fired:
		t.Fatalf("%q fired after being stopped", got)
	default:
	}
}
