package spiffe

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
)

// TestReadErrorsNameTheAPIAndAStableReason: every read of one outage yields the
// same input and reason whatever gRPC says on each attempt (the Reloader reports
// it once, by hotcert.ReadErrorKey), and another kind of failure another reason.
func TestReadErrorsNameTheAPIAndAStableReason(t *testing.T) {
	const input = "SPIFFE Workload API unix:///run/agent.sock"
	first := readError(input, status.Error(codes.Unavailable, "error reading server preface: EOF"))
	if first.Reason != hotcert.ReasonRead || first.Input != input {
		t.Fatalf("agent gone: %+v", first)
	}
	if got, want := first.Error(), input+": the Workload API is unavailable (is the agent running?): rpc error: code = Unavailable desc = error reading server preface: EOF"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
	for _, msg := range []string{
		`connection error: desc = "transport: Error while dialing: dial unix /run/agent.sock: connect: connection refused"`,
		`connection error: desc = "transport: Error while dialing: dial unix /run/agent.sock: connect: no such file or directory"`,
	} {
		if e := readError(input, status.Error(codes.Unavailable, msg)); hotcert.ReadErrorKey(e) != hotcert.ReadErrorKey(first) {
			t.Fatalf("a later read of the same outage (%s) is a new failure: %q", msg, e)
		}
	}
	if e := readError(input, status.Error(codes.PermissionDenied, "no identity issued")); e.Reason != hotcert.ReasonMissing {
		t.Fatalf("no identity: %+v, want a missing error", e)
	}
	if e := readError(input, errors.New("x509svid: certificate validation failed")); e.Reason != hotcert.ReasonParse {
		t.Fatalf("unparsable response: %+v", e)
	}
}
