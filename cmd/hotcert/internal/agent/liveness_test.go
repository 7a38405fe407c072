package agent

import (
	"testing"
	"time"
)

// A pause of the agent's own process (a CPU-starved machine: the heartbeat ticker
// delivers one late tick, the answers wait unread in the socket) is not the control
// plane's silence; a control plane that answers nothing is, once the timeout passed
// and the heartbeats sent in it went unanswered.
func TestLivenessTellsAPauseFromASilentControlPlane(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const interval, timeout = time.Second, 3 * time.Second

	// The agent's process pauses for 9s after its first heartbeat.
	l := newLiveness(interval, timeout, t0)
	if dead, _ := l.silent(at(interval)); dead {
		t.Fatal("silent one interval after the last message")
	}
	l.sent()
	if dead, silent := l.silent(at(10 * time.Second)); dead {
		t.Fatalf("a 9s pause of the agent's own process, one heartbeat unanswered, judged silent for %s", silent)
	}
	l.sent()
	l.received(at(10*time.Second + time.Millisecond)) // the answers it could not read
	if dead, _ := l.silent(at(11 * time.Second)); dead {
		t.Fatal("silent after an answer")
	}

	// A control plane that answers nothing: silent once the timeout passed and the
	// heartbeats that fit in it went unanswered, not before.
	l = newLiveness(interval, timeout, t0)
	for i := 1; i <= 3; i++ {
		if dead, silent := l.silent(at(time.Duration(i) * interval)); dead {
			t.Fatalf("judged silent after %s with %d heartbeats unanswered", silent, i-1)
		}
		l.sent()
	}
	if dead, silent := l.silent(at(4 * interval)); !dead || silent != 4*interval {
		t.Fatalf("three heartbeats unanswered over 4s: silent %v for %s, want silent for 4s", dead, silent)
	}

	// A timeout shorter than the interval: one unanswered heartbeat is enough.
	l = newLiveness(interval, interval/2, t0)
	l.sent()
	if dead, _ := l.silent(at(interval)); !dead {
		t.Fatal("one heartbeat unanswered past a timeout shorter than the interval: not judged silent")
	}
}
