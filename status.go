package hotcert

import "time"

// Status is a point-in-time view of a Reloader, for health endpoints and tools.
type Status = StatusOf[*Material]

// StatusOf is the one status shape of hotcert's reloaders: what is in use now and
// the failure state of the one reload engine they share. A [Reloader]'s Current is
// the Material in use ([Status]); a jwtkeys.KeySet's the key set in use
// (jwtkeys.Status).
type StatusOf[T any] struct {
	// Current is what is in use.
	Current T
	// LastError is the last reported failure, or nil once good content was seen after it.
	LastError error
	// LastErrorAt is when LastError was reported.
	LastErrorAt time.Time
	// Failures counts reported failures since the reloader was created.
	Failures uint64
}
