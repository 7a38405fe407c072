package jwtkeys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"

	"github.com/hotcert/hotcert"
)

// GenerateSigningKey returns a new private key for alg (ES256, RS256 with 2048 bits,
// or EdDSA) as a PKCS#8 "PRIVATE KEY" PEM block: the content of a signing.key file.
// For HS256 use [GenerateHMACSecret]. The equivalent openssl commands are in
// docs/jwt-keys.md.
func GenerateSigningKey(alg string) ([]byte, error) {
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case RS256:
		priv, err = rsa.GenerateKey(rand.Reader, MinRSABits)
	case EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("jwtkeys: cannot generate a key for %q: want %s, %s or %s", alg, ES256, RS256, EdDSA)
	}
	if err != nil {
		return nil, fmt.Errorf("jwtkeys: generate %s key: %w", alg, err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("jwtkeys: encode %s key: %w", alg, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// PublicKeyPEM returns the "PUBLIC KEY" PEM block of a PEM private key: what to add
// to a verify.pem file to publish a key before it signs, or to keep a previous key
// listed. It also returns the key's kid.
func PublicKeyPEM(privatePEM []byte) (pubPEM []byte, kid string, err error) {
	k, err := parseSigningKey(hotcert.Input{Name: "private key", Data: privatePEM})
	if err != nil {
		return nil, "", err
	}
	der, err := x509.MarshalPKIXPublicKey(k.public)
	if err != nil {
		return nil, "", fmt.Errorf("jwtkeys: encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), k.id, nil
}

// GenerateHMACSecret returns a new random 32-byte HS256 secret, base64-encoded: one
// line of an hs256.keys file (like `openssl rand -base64 32`).
func GenerateHMACSecret() (string, error) {
	var b [MinHMACSecretBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("jwtkeys: generate secret: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b[:]), nil
}

// HMACKeyID returns the kid of a base64 HS256 secret as it would appear in an
// hs256.keys line (a hash that names the secret without revealing it).
func HMACKeyID(secretLine string) (string, error) {
	ks, err := parseHMACSecrets(hotcert.Input{Name: "secret", Data: []byte(secretLine)})
	if err != nil {
		return "", err
	}
	return ks[0].id, nil
}
