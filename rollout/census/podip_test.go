package census

import "testing"

// TestPodIPs: a record gives back each pod IP as an address to dial, and
// none for no IP or one that would dial the controller's own host.
func TestPodIPs(t *testing.T) {
	for _, tc := range []struct{ ip, want string }{
		{"10.244.1.7", "10.244.1.7"},
		{"127.0.0.1", "127.0.0.1"},
		{"fd00:10:244::7", "fd00:10:244::7"},
		{"::1", "::1"},
		{"::ffff:10.244.1.7", "10.244.1.7"}, // the same address, dialled
		{"", ""},
		{"0.0.0.0", ""},
		{"::", ""},
		{"not-an-ip", ""},
	} {
		a, ok := compactIP(tc.ip).addr()
		got := ""
		if ok {
			got = a.String()
		}
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("pod IP %q: dialled as %q (%v), want %q", tc.ip, got, ok, tc.want)
		}
	}
}
