package hotcert_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// failingWatch is a memSource whose watch cannot start the first `failures` times.
type failingWatch struct {
	*memSource
	failures int64
	starts   atomic.Int64
}

func (s *failingWatch) Watch(ctx context.Context, changed func()) error {
	if s.starts.Add(1) <= s.failures {
		return errors.New("inotify: too many watches")
	}
	return s.memSource.Watch(ctx, changed)
}

func (s *failingWatch) String() string { return "failing" }

// countingWatch is a memSource that counts how many of its watches are running.
type countingWatch struct {
	*memSource
	running atomic.Int64
}

func (s *countingWatch) Watch(ctx context.Context, changed func()) error {
	s.running.Add(1)
	defer s.running.Add(-1)
	return s.memSource.Watch(ctx, changed)
}

// TestComposeWatchFailureStopsBothSides: when one side of Compose cannot watch, the
// composite watch stops the other side and returns that side's error at once.
func TestComposeWatchFailureStopsBothSides(t *testing.T) {
	leaf := hotcerttest.MustNewCA().MustIssue()
	for _, failing := range []string{"identity", "trust"} {
		t.Run(failing, func(t *testing.T) {
			bad := &failingWatch{memSource: newMemSource(identity(leaf)), failures: 1}
			good := &countingWatch{memSource: newMemSource(identity(leaf))}
			src := hotcert.Compose(bad, good)
			if failing == "trust" {
				src = hotcert.Compose(good, bad)
			}
			done := make(chan error, 1)
			go func() { done <- src.Watch(context.Background(), func() {}) }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "watching failing") || !strings.Contains(err.Error(), "too many watches") {
					t.Fatalf("Watch = %v, want the failing side named with its error", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Compose kept watching one side while the other had failed")
			}
			if n := good.running.Load(); n != 0 {
				t.Fatalf("%d watches of the healthy side still running", n)
			}
		})
	}
}

// TestComposeWatchFailureIsLoggedAndRestarted: a Reloader on Compose logs a side
// that fails to watch and restarts the watch, which then delivers changes.
func TestComposeWatchFailureIsLoggedAndRestarted(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	a, b := ca.MustIssue(), ca.MustIssue()
	id := &failingWatch{memSource: newMemSource(identity(a)), failures: 1}
	trust := newMemSource(hotcert.Content{CA: hotcert.Input{Name: "/ca/ca.crt", Data: hotcerttest.BundlePEM(ca)}})
	logs := &testutil.LogBuffer{}
	r, err := hotcert.New(context.Background(), hotcert.Compose(id, trust), hotcert.WithPollInterval(0),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil))), hotcert.WithComponent("api"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(context.Background()) }()
	defer func() { r.Close(); <-done }()
	testutil.WaitFor(t, "the watch failure to be logged", func() bool {
		return strings.Contains(logs.String(), "TLS source watch failed") && strings.Contains(logs.String(), "too many watches")
	})
	testutil.WaitFor(t, "the watch to restart", func() bool { return id.starts.Load() >= 2 })
	id.Set(identity(b), nil) // seen through the restarted watch (polling is off)
	testutil.WaitFor(t, "b served", func() bool { return serial(r.Current()) == b.Cert.SerialNumber.String() })
}
