package hotcert_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// loggingSource is a memSource that logs by itself, as the Kubernetes sources do:
// through the logger it was given, or else the one its Reloader hands it.
type loggingSource struct {
	*memSource
	logger *slog.Logger
}

func (s *loggingSource) SetDefaultLogger(l *slog.Logger) {
	if s.logger == nil {
		s.logger = l
	}
}

func (s *loggingSource) say(msg string) {
	if s.logger != nil {
		s.logger.Warn(msg)
	}
}

// TestReloaderHandsItsLoggerToItsSource: a source that logs and was given no
// logger logs through its Reloader's, with the component under the Reloader's key;
// Compose hands it to both sides; a source given its own logger keeps it.
func TestReloaderHandsItsLoggerToItsSource(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	id := &loggingSource{memSource: newMemSource(identity(leaf))}
	tr := &loggingSource{memSource: newMemSource(hotcert.Content{CA: hotcert.Input{Name: "ca", Data: hotcerttest.BundlePEM(ca)}})}
	own := &testutil.LogBuffer{}
	kept := &loggingSource{memSource: newMemSource(identity(leaf)), logger: slog.New(slog.NewTextHandler(own, nil))}

	logs := &testutil.LogBuffer{}
	opts := []hotcert.Option{hotcert.WithComponent("agent_grpc"), hotcert.WithComponentLabel("listener"),
		hotcert.WithLogAttrs("replica", "r1"), hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))}
	for _, src := range []hotcert.Source{hotcert.Compose(id, tr), kept} {
		r, err := hotcert.New(context.Background(), src, opts...)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	id.say("identity watch lost")
	tr.say("trust watch lost")
	kept.say("own watch lost")

	for _, msg := range []string{"identity watch lost", "trust watch lost"} {
		if logs.Count(msg) != 1 {
			t.Fatalf("%q not logged through the Reloader's logger:\n%s", msg, logs)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "watch lost") && !strings.Contains(line, " listener=agent_grpc replica=r1") {
			t.Errorf("a source's line lacks the Reloader's attributes: %s", line)
		}
	}
	if logs.Count("own watch lost") != 0 || own.Count("own watch lost") != 1 {
		t.Fatalf("a source given its own logger must keep it:\nreloader:\n%s\nown:\n%s", logs, own)
	}
}
