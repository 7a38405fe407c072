package jwtkeys

import (
	"github.com/hotcert/hotcert"
)

// Conventional names of the files of a key directory and of the keys of a Secret.
const (
	// SigningKeyName holds the one PEM private key that signs (ES256, RS256 or EdDSA).
	SigningKeyName = "signing.key"
	// VerificationKeysName holds PEM public keys that verify but never sign: the next
	// key, published before it signs, and previous keys kept for their tokens.
	VerificationKeysName = "verify.pem"
	// HMACSecretsName holds HS256 secrets, one base64 secret per line: the first
	// signs, all verify.
	HMACSecretsName = "hs256.keys"
)

// Content is the raw key material one read of a [Source] returns.
//
// Exactly one of SigningKey and HMACSecrets is present: it holds the key that signs.
// VerificationKeys is optional.
type Content struct {
	// SigningKey is one PEM private key ("PRIVATE KEY", "EC PRIVATE KEY" or
	// "RSA PRIVATE KEY"): an ECDSA P-256 key signs ES256, an RSA key of at least
	// 2048 bits RS256, an Ed25519 key EdDSA.
	SigningKey hotcert.Input
	// VerificationKeys is zero or more PEM "PUBLIC KEY" blocks accepted for
	// verification while they are listed.
	VerificationKeys hotcert.Input
	// HMACSecrets is a list of HS256 secrets, one per line, each base64 (standard or
	// URL alphabet, padding optional) of at least 32 bytes. Blank lines and lines
	// starting with '#' are ignored. The first secret signs, all verify.
	HMACSecrets hotcert.Input
	// Source describes where the content was read from, for logs.
	Source string
}

// Hash returns the SHA-256 of the content's data in an unambiguous encoding
// (hotcert.HashInputs). Names are not hashed.
func (c Content) Hash() [32]byte {
	return hotcert.HashInputs(c.SigningKey, c.VerificationKeys, c.HMACSecrets)
}
