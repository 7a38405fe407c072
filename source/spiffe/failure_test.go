package spiffe

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
)

// TestOneOutageIsOneError: the Reloader reports a failure once per distinct error
// message, so every read of one outage must return the same error whatever gRPC
// says on each attempt, and a different kind of failure must be a new one.
func TestOneOutageIsOneError(t *testing.T) {
	const input = "SPIFFE Workload API unix:///run/agent.sock"
	var f *failure
	f = f.next(input, status.Error(codes.Unavailable, "error reading server preface: EOF"))
	first := f.err
	if first.Reason != hotcert.ReasonRead || first.Input != input {
		t.Fatalf("agent gone: %+v", first)
	}
	for _, msg := range []string{
		`connection error: desc = "transport: Error while dialing: dial unix /run/agent.sock: connect: connection refused"`,
		`connection error: desc = "transport: Error while dialing: dial unix /run/agent.sock: connect: no such file or directory"`,
	} {
		f = f.next(input, status.Error(codes.Unavailable, msg))
		if f.err != first {
			t.Fatalf("a later read of the same outage (%s) returned a new error %q", msg, f.err)
		}
	}

	f = f.next(input, status.Error(codes.PermissionDenied, "no identity issued"))
	if f.err == first || f.err.Reason != hotcert.ReasonMissing {
		t.Fatalf("no identity: %+v, want a new missing error", f.err)
	}
	f = f.next(input, errors.New("x509svid: certificate validation failed"))
	if f.err.Reason != hotcert.ReasonParse {
		t.Fatalf("unparsable response: %+v", f.err)
	}
	// After a good read (nil) the same condition is a new outage, reported again.
	var again *failure
	if again = again.next(input, status.Error(codes.Unavailable, "EOF")); again.err == first {
		t.Fatal("a new outage returned the error of the previous one")
	}
	if got, want := again.err.Error(), input+": the Workload API is unavailable (is the agent running?): rpc error: code = Unavailable desc = EOF"; got != want {
		t.Fatalf("error %q, want %q", got, want)
	}
}
