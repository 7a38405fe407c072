package hotcert

import (
	"errors"
	"fmt"
	"time"
)

// Reason classifies why content was rejected. It is stable and safe to use as a
// metric label or in alerts.
type Reason string

// Reasons returned in [Error.Reason].
const (
	ReasonRead        Reason = "read"          // the input could not be read
	ReasonMissing     Reason = "missing"       // the input does not exist
	ReasonTooLarge    Reason = "too_large"     // the input is larger than the size cap
	ReasonNotRegular  Reason = "not_regular"   // a directory, device or other non-regular file
	ReasonEmpty       Reason = "empty"         // the input holds no PEM block at all
	ReasonPEM         Reason = "pem"           // a PEM block is malformed or truncated, or of the wrong type
	ReasonParse       Reason = "parse"         // a certificate or key does not parse
	ReasonKeyMismatch Reason = "key_mismatch"  // the private key does not match the leaf certificate
	ReasonExpired     Reason = "expired"       // a certificate's NotAfter has passed
	ReasonNotYetValid Reason = "not_yet_valid" // a certificate's NotBefore is in the future
	ReasonNotCA       Reason = "not_ca"        // a certificate of the trust bundle is not a CA
	ReasonChain       Reason = "chain"         // the leaf does not chain to the required roots
	ReasonUsage       Reason = "usage"         // the leaf lacks a required extended key usage
	ReasonWeakKey     Reason = "weak_key"      // the key is weaker than the required minimum
	ReasonIncomplete  Reason = "incomplete"    // content lacks a required part (e.g. a key without a certificate)
)

// Error is returned when content cannot become Material. Its message starts with the
// input (a file path, or "Secret ns/name key tls.crt") and says what is wrong with it,
// e.g. "/tls/tls.crt: leaf certificate (CN=api serial=1F) expired at 2026-01-02T00:00:00Z".
// It never contains key material.
type Error struct {
	// Input names where the offending bytes came from.
	Input string
	// Reason classifies the problem.
	Reason Reason
	// Detail says what is wrong, in words.
	Detail string
	// Err is the underlying error, if any.
	Err error

	validFrom time.Time // ReasonNotYetValid: when the refused content may become valid
}

func (e *Error) Error() string {
	msg := e.Input + ": " + e.Detail
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of the first [*Error] in err's chain, or ReasonRead when
// err is non-nil but carries no Reason, or "" for a nil error.
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonRead
}

// ReadErrorKey identifies a failed read for a reloader's de-duplication
// (reload.Spec.ReadErrorKey): the Input and Reason of the first [*Error] in err's
// chain, or err's message for an error that carries none. Reads of one input that
// fail for one reason are one failure, reported and counted once, however their
// messages differ (a gRPC stream's "EOF", then "connection refused"); a new reason,
// or another input, is a new failure.
func ReadErrorKey(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return "input\x00" + e.Input + "\x00reason\x00" + string(e.Reason)
	}
	return "message\x00" + err.Error()
}

// ValidFrom returns when content that [Validate] refused with err becomes valid by
// the clock alone: for a [ReasonNotYetValid] refusal, the earliest NotBefore of
// its chain that is still in the future (once the clock passes it, the content is
// validated again and may be accepted, or refused for the next one). For any other
// error, or nil, it returns the zero time: only new content changes the answer.
func ValidFrom(err error) time.Time {
	var e *Error
	if errors.As(err, &e) && e.Reason == ReasonNotYetValid {
		return e.validFrom
	}
	return time.Time{}
}

func newError(input string, reason Reason, err error, format string, args ...any) *Error {
	return &Error{Input: input, Reason: reason, Detail: fmt.Sprintf(format, args...), Err: err}
}
