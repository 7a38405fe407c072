package reload_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// failingSource fails every read with the error a test sets.
type failingSource struct{ err error }

func (s *failingSource) Read(context.Context) (string, error)      { return "", s.err }
func (s *failingSource) Watch(ctx context.Context, _ func()) error { <-ctx.Done(); return nil }
func (s *failingSource) String() string                            { return "failing" }

// TestReadErrorsAreOneFailurePerInputAndReason: with hotcert.ReadErrorKey, reads
// of one input failing for one reason are one failure however their messages
// vary (one outage of a gRPC stream: "EOF", then "connection refused"); another
// reason is a new failure, and so is another message of an error that names no
// input (the default key).
func TestReadErrorsAreOneFailurePerInputAndReason(t *testing.T) {
	const input = "SPIFFE Workload API unix:///run/agent.sock"
	unavailable := func(msg string) error {
		return &hotcert.Error{Input: input, Reason: hotcert.ReasonRead, Detail: "unavailable", Err: errors.New(msg)}
	}
	src := &failingSource{}
	var reported []error
	e := reload.New[string, string](src, reload.Spec[string, string]{
		Hash:         func(s string) [32]byte { return sha256.Sum256([]byte(s)) },
		Validate:     func(s string) (string, error) { return s, nil },
		CurrentHash:  func() [32]byte { return sha256.Sum256([]byte("in use")) },
		Publish:      func(string) {},
		Failed:       func(err error) { reported = append(reported, err) },
		ReadErrorKey: hotcert.ReadErrorKey,
	})
	steps := []struct {
		err  error
		want int // failures reported so far
	}{
		{unavailable("error reading server preface: EOF"), 1},
		{unavailable("dial unix /run/agent.sock: connect: connection refused"), 1},
		{unavailable("dial unix /run/agent.sock: connect: no such file or directory"), 1},
		{&hotcert.Error{Input: input, Reason: hotcert.ReasonMissing, Detail: "no SVID"}, 2},
		{&hotcert.Error{Input: "/tls/tls.crt", Reason: hotcert.ReasonMissing, Detail: "no SVID"}, 3},
		{errors.New("foreign: one"), 4},
		{errors.New("foreign: one"), 4},
		{errors.New("foreign: two"), 5},
	}
	for i, s := range steps {
		src.err = s.err
		if err := e.Check(context.Background()); err == nil {
			t.Fatalf("step %d: a failing read checked fine", i)
		}
		if len(reported) != s.want || e.Status().Failures != uint64(s.want) {
			t.Fatalf("step %d (%v): %d failures reported (status %d), want %d", i, s.err, len(reported), e.Status().Failures, s.want)
		}
	}
}
