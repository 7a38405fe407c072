package spiffe

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
)

// readError turns a failed fetch into the [*hotcert.Error] a read returns: it
// names the Workload API and gives a stable reason, which is what the Reloader
// reports a failure once by (hotcert.ReadErrorKey), while gRPC's message for one
// outage varies from read to read ("EOF", "connection refused", "no such file").
func readError(input string, err error) *hotcert.Error {
	var he *hotcert.Error
	if errors.As(err, &he) {
		return he
	}
	st, isStatus := status.FromError(err)
	switch {
	case !isStatus:
		// Not from gRPC: go-spiffe refused the agent's response (an SVID or
		// bundle that does not parse, a key that does not match).
		return &hotcert.Error{Input: input, Reason: hotcert.ReasonParse, Detail: "the X.509 context does not parse", Err: err}
	case st.Code() == codes.PermissionDenied:
		return &hotcert.Error{Input: input, Reason: hotcert.ReasonMissing, Detail: "no X.509-SVID issued to this workload (no registration entry matches it yet?)", Err: err}
	case st.Code() == codes.Unavailable:
		return &hotcert.Error{Input: input, Reason: hotcert.ReasonRead, Detail: "the Workload API is unavailable (is the agent running?)", Err: err}
	default:
		return &hotcert.Error{Input: input, Reason: hotcert.ReasonRead, Detail: "fetching the X.509 context failed", Err: err}
	}
}
