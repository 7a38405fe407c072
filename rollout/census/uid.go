package census

import (
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// podUID is a pod's UID as a record keeps it: the 16 bytes of a UUID in
// its canonical form (lower-case hex, 8-4-4-4-12), which is what the API
// server gives a pod, else the string itself. A UUID as a string takes 64
// bytes of heap a pod (its header and its 36 bytes, rounded up); this, 24.
type podUID struct {
	id    [16]byte
	other *types.UID // a UID not in the canonical form (nil for one that is)
}

// uuidDashes are where the canonical form has its dashes.
var uuidDashes = [...]int{8, 13, 18, 23}

func compactUID(u types.UID) podUID {
	s := string(u)
	if len(s) != 36 {
		return podUID{other: &u}
	}
	var hexDigits [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if i == uuidDashes[0] || i == uuidDashes[1] || i == uuidDashes[2] || i == uuidDashes[3] {
			if s[i] != '-' {
				return podUID{other: &u}
			}
			continue
		}
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return podUID{other: &u} // upper case is not canonical: kept as it is
		}
		hexDigits[n] = c
		n++
	}
	var p podUID
	if _, err := hex.Decode(p.id[:], hexDigits[:]); err != nil || p.id == [16]byte{} {
		return podUID{other: &u} // the nil UUID as a string: zero bytes stand for "" (none)
	}
	return p
}

// UID is the UID as the API server wrote it.
func (p podUID) UID() types.UID {
	if p.id == [16]byte{} {
		if p.other == nil {
			return ""
		}
		return *p.other
	}
	h := hex.EncodeToString(p.id[:])
	return types.UID(h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:])
}
