package census

import (
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestPodUIDs: a record keeps a canonical UUID as its 16 bytes, and gives
// every UID, canonical or not, a key of its own: the same UID the same key,
// two UIDs two keys (upper and lower case included), none the zero key.
func TestPodUIDs(t *testing.T) {
	uids := []struct {
		uid       types.UID
		canonical bool
	}{
		{"0b1c7e1e-55c9-4a4e-9d2f-3c1b2a0f9e8d", true},
		{"00000000-0000-0000-0000-000000000001", true},
		{"00000000-0000-0000-0000-000000000000", false}, // the nil UUID
		{"0B1C7E1E-55C9-4A4E-9D2F-3C1B2A0F9E8D", false}, // not canonical: upper case
		{"0b1c7e1e-55c9-4a4e-9d2f-3c1b2a0f9e8", false},
		{"0b1c7e1e+55c9-4a4e-9d2f-3c1b2a0f9e8d", false},
		{"0b1c7e1e-55c9-4a4e-9d2f-3c1b2a0f9e8g", false},
		{"uid", false},
	}
	seen := map[podUID]types.UID{}
	for _, tc := range uids {
		p := compactUID(tc.uid)
		if p == (podUID{}) {
			t.Errorf("%q has the zero key, that of no UID", tc.uid)
		}
		if again := compactUID(types.UID(strings.Clone(string(tc.uid)))); again != p {
			t.Errorf("%q: two keys, %x and %x", tc.uid, p, again)
		}
		if prev, ok := seen[p]; ok {
			t.Errorf("%q and %q have one key, %x", prev, tc.uid, p)
		}
		seen[p] = tc.uid
		want, _ := hex.DecodeString(strings.ReplaceAll(string(tc.uid), "-", ""))
		if canonical := string(p[:]) == string(want); canonical != tc.canonical {
			t.Errorf("%q: kept as its UUID's bytes %v, want %v", tc.uid, canonical, tc.canonical)
		}
	}
	if p := compactUID(""); p != (podUID{}) {
		t.Errorf("no UID has key %x, want the zero key", p)
	}
}
