package spiffe

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
)

// failure is a failed read as the Reloader sees it. The Reloader reports a failure
// once per distinct error message; gRPC's messages for one outage vary (the stream
// breaks with "EOF", redials see "connection refused", then "no such file" once the
// agent removed its socket), so one outage must read as one error: a failure is
// kept, and returned again, for as long as reads keep failing the same way.
type failure struct {
	reason hotcert.Reason
	code   codes.Code
	err    *hotcert.Error
}

// next returns the failure a read that failed with err reports, given the failure
// f of the reads before it (nil after a good read).
func (f *failure) next(input string, err error) *failure {
	n := classify(input, err)
	if f != nil && f.reason == n.reason && f.code == n.code {
		return f // the same outage
	}
	return n
}

func classify(input string, err error) *failure {
	var he *hotcert.Error
	if errors.As(err, &he) {
		return &failure{reason: he.Reason, code: codes.OK, err: he}
	}
	st, isStatus := status.FromError(err)
	f := &failure{reason: hotcert.ReasonRead, code: st.Code()}
	switch {
	case !isStatus:
		// Not from gRPC: go-spiffe refused the agent's response (an SVID or
		// bundle that does not parse, a key that does not match).
		f.reason, f.code = hotcert.ReasonParse, codes.Unknown
		f.err = &hotcert.Error{Input: input, Reason: f.reason, Detail: "the X.509 context does not parse", Err: err}
	case st.Code() == codes.PermissionDenied:
		f.reason = hotcert.ReasonMissing
		f.err = &hotcert.Error{Input: input, Reason: f.reason, Detail: "no X.509-SVID issued to this workload (no registration entry matches it yet?)", Err: err}
	case st.Code() == codes.Unavailable:
		f.err = &hotcert.Error{Input: input, Reason: f.reason, Detail: "the Workload API is unavailable (is the agent running?)", Err: err}
	default:
		f.err = &hotcert.Error{Input: input, Reason: f.reason, Detail: "fetching the X.509 context failed", Err: err}
	}
	return f
}
