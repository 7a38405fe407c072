package census

import "net/netip"

// podIP is a pod's IP as a record keeps it: its 16 bytes, an IPv4 address
// as IPv4-mapped IPv6 (netip.Addr.As16), the zero value for none. A
// netip.Addr takes 8 bytes more, for the family and zone it keeps apart:
// a pod IP has no zone, and its only use here is to be dialled, where an
// IPv4-mapped address is its IPv4 address.
type podIP [16]byte

// compactIP is the pod IP s (as the API server validated it), none for ""
// or an unspecified address: dialling 0.0.0.0 or :: reaches the dialler's
// own host, not a pod.
func compactIP(s string) podIP {
	a, err := netip.ParseAddr(s)
	if err != nil || a.IsUnspecified() {
		return podIP{}
	}
	return a.As16()
}

// addr is the IP to dial, an IPv4 address as such (ok false for none).
func (p podIP) addr() (a netip.Addr, ok bool) {
	if p == (podIP{}) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16(p).Unmap(), true
}
