package jwtkeys

import (
	"fmt"
	"time"

	"github.com/hotcert/hotcert"
)

// Material is an immutable, validated key set as one read of a source holds it: the
// key that signs and the keys listed for verification only. Keys retired by a
// rotation are not part of it: they live in the [KeySet] for their grace period.
type Material struct {
	signer   *key
	listed   []*key // verification-only keys, in content order, without the signer
	hash     [32]byte
	source   string
	loadedAt time.Time
}

// Validate turns raw content into Material, or explains why it cannot. It checks:
//
//   - exactly one of SigningKey and HMACSecrets is present;
//   - the signing key is one unencrypted PEM private key of a supported type and
//     size (ECDSA P-256, RSA ≥ 2048 bits, Ed25519), each HS256 secret is base64 of at
//     least 32 bytes;
//   - every PEM block of VerificationKeys is a supported public key (a truncated
//     last key is an error, not a silently shorter list).
//
// PEM follows hotcert's one grammar (see hotcert.DecodePEM): text outside blocks is
// ignored, every BEGIN block must parse, parameter blocks such as the EC PARAMETERS
// block `openssl ecparam -genkey` writes are skipped.
//
// Every error is a *hotcert.Error naming the input; none contains key material.
// `hotcert check`-style tools can call it on files before installing them.
func Validate(c Content) (*Material, error) {
	m := &Material{hash: c.Hash(), source: c.Source, loadedAt: time.Now()}
	var signing []*key
	switch {
	case c.SigningKey.Present() && c.HMACSecrets.Present():
		return nil, &hotcert.Error{Input: c.SigningKey.Name, Reason: hotcert.ReasonIncomplete,
			Detail: fmt.Sprintf("given together with HMAC secrets %s: exactly one of them signs", c.HMACSecrets.Name)}
	case c.SigningKey.Present():
		k, err := parseSigningKey(c.SigningKey)
		if err != nil {
			return nil, err
		}
		signing = []*key{k}
	case c.HMACSecrets.Present():
		ks, err := parseHMACSecrets(c.HMACSecrets)
		if err != nil {
			return nil, err
		}
		signing = ks
	default:
		return nil, &hotcert.Error{Input: describe(c), Reason: hotcert.ReasonIncomplete, Detail: "no signing key and no HMAC secrets"}
	}
	var verifying []*key
	if c.VerificationKeys.Present() {
		ks, err := parseVerificationKeys(c.VerificationKeys)
		if err != nil {
			return nil, err
		}
		verifying = ks
	}
	m.signer = signing[0]
	seen := map[string]bool{m.signer.id: true}
	for _, k := range append(signing[1:], verifying...) {
		if !seen[k.id] { // the next key may be listed while it signs already: fine
			seen[k.id] = true
			m.listed = append(m.listed, k)
		}
	}
	return m, nil
}

func describe(c Content) string {
	if c.Source != "" {
		return c.Source
	}
	return "key content"
}

// SigningKeyID returns the kid of the key that signs.
func (m *Material) SigningKeyID() string { return m.signer.id }

// Algorithm returns the algorithm of the key that signs.
func (m *Material) Algorithm() string { return m.signer.alg }

// ContentHash returns the SHA-256 of the content the material was built from.
func (m *Material) ContentHash() [32]byte { return m.hash }

// Source describes where the material was read from.
func (m *Material) Source() string { return m.source }

// LoadedAt returns when the material was validated.
func (m *Material) LoadedAt() time.Time { return m.loadedAt }

// Keys describes the signing key, then the listed verification keys in order.
func (m *Material) Keys() []KeyInfo {
	out := []KeyInfo{info(m.signer, KeySigning)}
	for _, k := range m.listed {
		out = append(out, info(k, KeyListed))
	}
	return out
}

// KeyState says why a key verifies.
type KeyState string

// Key states.
const (
	KeySigning KeyState = "signing" // the key that signs new tokens (and verifies)
	KeyListed  KeyState = "listed"  // listed by the source for verification only, until removed
	KeyRetired KeyState = "retired" // signed until a rotation; verifies until its grace period ends
)

// KeyInfo describes one key of a set. It holds no key material.
type KeyInfo struct {
	// ID is the key's kid.
	ID string
	// Algorithm is the one algorithm the key signs and verifies with.
	Algorithm string
	// State says why the key verifies.
	State KeyState
	// RetiredAt is when a retired key stopped signing (zero otherwise).
	RetiredAt time.Time
	// VerifiesUntil is when a retired key stops verifying (zero otherwise).
	VerifiesUntil time.Time
}

func info(k *key, s KeyState) KeyInfo { return KeyInfo{ID: k.id, Algorithm: k.alg, State: s} }
