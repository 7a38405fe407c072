package census

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/types"
)

// podUID is a pod's UID as a record keeps it, to match the pod's
// PodCertificateRequests (whose spec.podUID is the UID as a string): the 16
// bytes of a UUID in its canonical form (lower-case hex, 8-4-4-4-12), which
// is what the API server gives every pod it creates, else the first 16
// bytes of the string's SHA-256. Equal UIDs have equal keys, and different
// ones different keys (but with a chance of 2⁻¹²⁸). A UUID as a string takes
// 64 bytes of heap a pod (its header and its 36 bytes, rounded up), and a
// pointer to any string would take 8 bytes more of the record: this is 16,
// in the record (BenchmarkPodRecords). The zero key is no UID.
type podUID [16]byte

// uuidDashes are where the canonical form has its dashes.
var uuidDashes = [...]int{8, 13, 18, 23}

func compactUID(u types.UID) podUID {
	s := string(u)
	if s == "" {
		return podUID{}
	}
	if p, ok := canonicalUUID(s); ok {
		return p
	}
	sum := sha256.Sum256([]byte(s))
	return podUID(sum[:16])
}

// canonicalUUID is the 16 bytes of s when it is a UUID in its canonical
// form, other than the nil UUID (whose zero bytes stand for no UID).
func canonicalUUID(s string) (podUID, bool) {
	if len(s) != 36 {
		return podUID{}, false
	}
	var hexDigits [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if i == uuidDashes[0] || i == uuidDashes[1] || i == uuidDashes[2] || i == uuidDashes[3] {
			if s[i] != '-' {
				return podUID{}, false
			}
			continue
		}
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return podUID{}, false // upper case is not canonical: hashed as it is
		}
		hexDigits[n] = c
		n++
	}
	var p podUID
	if _, err := hex.Decode(p[:], hexDigits[:]); err != nil || p == (podUID{}) {
		return podUID{}, false
	}
	return p, true
}
