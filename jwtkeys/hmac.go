package jwtkeys

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
)

// parseHMACSecrets parses an HS256 secret list: one base64 secret per line (standard
// or URL alphabet, padding optional), blank lines and '#' comments ignored, in order.
// Error messages name line numbers, never secrets.
func parseHMACSecrets(in hotcert.Input) ([]*key, error) {
	var keys []*key
	for i, line := range bytes.Split(in.Data, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		secret, ok := decodeBase64(s)
		if !ok {
			return nil, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonParse,
				Detail: fmt.Sprintf("line %d is not a base64 secret", i+1)}
		}
		if len(secret) < MinHMACSecretBytes {
			return nil, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonWeakKey,
				Detail: fmt.Sprintf("the secret on line %d has %d bytes: HS256 needs at least %d", i+1, len(secret), MinHMACSecretBytes)}
		}
		keys = append(keys, &key{id: hmacKeyID(secret), alg: HS256, method: jwt.SigningMethodHS256, verify: secret, sign: secret})
	}
	if len(keys) == 0 {
		return nil, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonEmpty, Detail: "holds no HS256 secret"}
	}
	return keys, nil
}

func decodeBase64(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}
