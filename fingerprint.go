package hotcert

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// ParseFingerprint reads a SHA-256 certificate fingerprint as openssl prints it
// (upper-case hex pairs and colons, optionally after "sha256 Fingerprint=") or as
// hotcert prints it (lower-case hex).
func ParseFingerprint(s string) (Fingerprint, error) {
	var fp Fingerprint
	h := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	if i := strings.LastIndexByte(h, '='); i >= 0 {
		h = h[i+1:]
	}
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != len(fp) {
		return fp, fmt.Errorf("%q is not a SHA-256 fingerprint (64 hex digits, colons allowed)", s)
	}
	copy(fp[:], b)
	return fp, nil
}
