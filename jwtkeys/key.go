package jwtkeys

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
)

// The algorithms a key can be pinned to. A key verifies only tokens whose "alg"
// header names its own algorithm; "none" is never accepted.
const (
	ES256 = "ES256" // ECDSA P-256 with SHA-256
	RS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256, RSA keys of at least 2048 bits
	EdDSA = "EdDSA" // Ed25519
	HS256 = "HS256" // HMAC SHA-256 with a shared secret of at least 32 bytes
)

const (
	// MinRSABits is the smallest RSA modulus accepted for RS256.
	MinRSABits = 2048
	// MinHMACSecretBytes is the smallest HS256 secret accepted (RFC 7518 §3.2: a key
	// of the same size as the hash output or larger).
	MinHMACSecretBytes = 32
)

// key is one parsed key with its pinned algorithm. It is immutable.
type key struct {
	id     string
	alg    string
	method jwt.SigningMethod
	// verify is what the jwt library verifies with: *ecdsa.PublicKey,
	// *rsa.PublicKey, ed25519.PublicKey or the HMAC secret ([]byte).
	verify any
	// sign is what the jwt library signs with (nil for a verification-only key).
	sign any
	// public is the public key (nil for HMAC: a shared secret is never published).
	public crypto.PublicKey
}

func (k *key) symmetric() bool { return k.public == nil }

// KeyID returns the key ID hotcert gives a public key, as Kubernetes does for its
// service-account keys: the unpadded base64url SHA-256 of the key's PKIX DER
// encoding. It is stable across processes and restarts, so every replica and every
// verifier agrees on it.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("jwtkeys: key ID: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// hmacKeyID derives an HS256 key's ID from its secret: a domain-separated SHA-256,
// so the ID names the secret without revealing it.
func hmacKeyID(secret []byte) string {
	h := sha256.New()
	h.Write([]byte("hotcert jwtkeys HS256 key id\x00"))
	h.Write(secret)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// publicKey returns the verification key of pub with its pinned algorithm, or an
// error for key types and sizes hotcert does not sign or verify with.
func publicKey(input string, pub crypto.PublicKey) (*key, error) {
	k := &key{public: pub, verify: pub}
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		if p.Curve != elliptic.P256() {
			return nil, &hotcert.Error{Input: input, Reason: hotcert.ReasonParse,
				Detail: fmt.Sprintf("ECDSA key on curve %s is not supported: use P-256 (ES256)", p.Curve.Params().Name)}
		}
		k.alg, k.method = ES256, jwt.SigningMethodES256
	case *rsa.PublicKey:
		if bits := p.N.BitLen(); bits < MinRSABits {
			return nil, &hotcert.Error{Input: input, Reason: hotcert.ReasonWeakKey,
				Detail: fmt.Sprintf("RSA key of %d bits is too weak: RS256 needs at least %d", bits, MinRSABits)}
		}
		k.alg, k.method = RS256, jwt.SigningMethodRS256
	case ed25519.PublicKey:
		k.alg, k.method = EdDSA, jwt.SigningMethodEdDSA
	default:
		return nil, &hotcert.Error{Input: input, Reason: hotcert.ReasonParse,
			Detail: fmt.Sprintf("key type %T is not supported: use ECDSA P-256, RSA or Ed25519", pub)}
	}
	id, err := KeyID(pub)
	if err != nil {
		return nil, &hotcert.Error{Input: input, Reason: hotcert.ReasonParse, Detail: "public key cannot be encoded", Err: err}
	}
	k.id = id
	return k, nil
}

// parseSigningKey parses the one PEM private key of in, with hotcert's PEM grammar
// (hotcert.ParsePrivateKey: text outside blocks ignored, parameter blocks skipped,
// exactly one unencrypted private key).
func parseSigningKey(in hotcert.Input) (*key, error) {
	signer, err := hotcert.ParsePrivateKey(in)
	if err != nil {
		return nil, err
	}
	k, err := publicKey(in.Name, signer.Public())
	if err != nil {
		return nil, err
	}
	k.sign = signer
	return k, nil
}

// parseVerificationKeys parses every public key of in, in order, with hotcert's PEM
// grammar (hotcert.ParsePublicKeys: every block must be a public key that parses, so
// a truncated last key is an error, not a silently shorter list). Input holding
// only whitespace has no keys.
func parseVerificationKeys(in hotcert.Input) ([]*key, error) {
	if len(bytes.TrimSpace(in.Data)) == 0 {
		return nil, nil
	}
	pubs, err := hotcert.ParsePublicKeys(in)
	if err != nil {
		return nil, err
	}
	keys := make([]*key, 0, len(pubs))
	for i, pub := range pubs {
		k, err := publicKey(fmt.Sprintf("%s (public key %d)", in.Name, i+1), pub)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}
