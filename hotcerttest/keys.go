package hotcerttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// KeyType selects the key algorithm of a generated certificate.
type KeyType int

// The supported key types. The zero value, ECDSAP256, is the default.
const (
	ECDSAP256 KeyType = iota // ECDSA on NIST P-256 (default, fastest)
	ECDSAP384                // ECDSA on NIST P-384
	RSA2048                  // 2048-bit RSA
	RSA3072                  // 3072-bit RSA
	RSA1024                  // 1024-bit RSA, deliberately weak for minimum-strength tests
	Ed25519                  // Ed25519
)

// String returns a short name such as "ECDSA-P256" or "RSA-2048".
func (kt KeyType) String() string {
	switch kt {
	case ECDSAP256:
		return "ECDSA-P256"
	case ECDSAP384:
		return "ECDSA-P384"
	case RSA2048:
		return "RSA-2048"
	case RSA3072:
		return "RSA-3072"
	case RSA1024:
		return "RSA-1024"
	case Ed25519:
		return "Ed25519"
	}
	return fmt.Sprintf("KeyType(%d)", int(kt))
}

func generateKey(kt KeyType) (crypto.Signer, error) {
	switch kt {
	case ECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case ECDSAP384:
		return ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case RSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case RSA3072:
		return rsa.GenerateKey(rand.Reader, 3072)
	case RSA1024:
		return rsa.GenerateKey(rand.Reader, 1024)
	case Ed25519:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		return k, err
	}
	return nil, fmt.Errorf("unknown key type %v", kt)
}

// KeyFormat selects the PEM encoding of a private key.
type KeyFormat int

// The supported private key encodings.
const (
	KeyFormatPKCS8 KeyFormat = iota // "PRIVATE KEY", any key type (the default)
	KeyFormatPKCS1                  // "RSA PRIVATE KEY", RSA keys only
	KeyFormatSEC1                   // "EC PRIVATE KEY", ECDSA keys only
)

func encodeKeyPEM(key crypto.Signer, format KeyFormat) ([]byte, error) {
	var block *pem.Block
	switch format {
	case KeyFormatPKCS8:
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, err
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	case KeyFormatPKCS1:
		k, ok := key.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("PKCS#1 needs an RSA key, have %T", key)
		}
		block = &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}
	case KeyFormatSEC1:
		k, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("SEC 1 needs an ECDSA key, have %T", key)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, err
		}
		block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
	default:
		return nil, fmt.Errorf("unknown key format %d", int(format))
	}
	return pem.EncodeToMemory(block), nil
}
