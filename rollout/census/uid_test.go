package census

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestPodUIDs: a record gives back every pod's UID as the API server wrote
// it, in 16 bytes and a nil pointer when it is a canonical UUID.
func TestPodUIDs(t *testing.T) {
	for _, tc := range []struct {
		uid     types.UID
		compact bool
	}{
		{"0b1c7e1e-55c9-4a4e-9d2f-3c1b2a0f9e8d", true},
		{"00000000-0000-0000-0000-000000000001", true},
		{"00000000-0000-0000-0000-000000000000", false}, // the nil UUID
		{"0B1C7E1E-55C9-4A4E-9D2F-3C1B2A0F9E8D", false}, // not canonical: upper case
		{"0b1c7e1e-55c9-4a4e-9d2f-3c1b2a0f9e8", false},
		{"0b1c7e1e+55c9-4a4e-9d2f-3c1b2a0f9e8d", false},
		{"0b1c7e1e-55c9-4a4e-9d2f-3c1b2a0f9e8g", false},
		{"uid", false},
		{"", false},
	} {
		p := compactUID(tc.uid)
		if got := p.UID(); got != tc.uid {
			t.Errorf("%q came back as %q", tc.uid, got)
		}
		if compact := p.other == nil && tc.uid != ""; compact != tc.compact {
			t.Errorf("%q: kept in 16 bytes %v, want %v", tc.uid, compact, tc.compact)
		}
	}
}
