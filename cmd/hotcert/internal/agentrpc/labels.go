package agentrpc

import (
	"maps"
	"slices"
)

// HandshakeReasons lists every value HandshakeReason returns for a failed TLS
// handshake or dial: the label values of the handshake-failure counters.
func HandshakeReasons() []string {
	return []string{
		ReasonUnknownAuthority, ReasonHostname, ReasonExpired, ReasonInvalid, ReasonPeerRejected,
		ReasonNoClientCert, ReasonALPN, ReasonNotTLS, ReasonTimeout, ReasonUnreachable, ReasonOther,
	}
}

// ConnectReasons lists every reason a connection attempt fails with: the handshake
// reasons and ReasonUnauthenticated.
func ConnectReasons() []string { return append(HandshakeReasons(), ReasonUnauthenticated) }

// WithZeros returns counts by label value with every known value present (0 when it
// never occurred), in a stable order, followed by any other value that occurred.
// Counters exported this way exist before their first increment, so an alert on
// increase(...) > 0 sees the first burst.
func WithZeros(counts map[string]uint64, known []string) (values []string, n []uint64) {
	for _, k := range known {
		values, n = append(values, k), append(n, counts[k])
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		if !slices.Contains(known, k) {
			values, n = append(values, k), append(n, counts[k])
		}
	}
	return values, n
}
