package hotcert

import (
	"crypto/sha256"
	"encoding/binary"
)

// Input is one named piece of raw content: a file, or a key of a Secret or ConfigMap.
type Input struct {
	// Name says where Data came from, for error messages and logs: a file path or
	// "Secret ns/name key tls.crt". An Input with an empty Name is absent.
	Name string
	// Data is the raw PEM bytes.
	Data []byte
}

// Present reports whether the input was provided by its source.
func (in Input) Present() bool { return in.Name != "" }

// Content is the raw material one read of a [Source] returns. Any part may be absent;
// [Validate] decides whether the whole makes sense.
type Content struct {
	// Cert is the certificate chain, leaf first.
	Cert Input
	// Key is the private key of the leaf.
	Key Input
	// CA is the trust bundle: every CA certificate the process trusts for its peers.
	CA Input
	// Source describes where the content was read from (e.g. the file source's
	// paths, or the Secret's name), for logs and [Material.Source].
	Source string
}

// Hash returns the SHA-256 of the content's data ([HashInputs] of the certificate,
// the key and the CA bundle). Names are not hashed: the same bytes read from
// elsewhere are the same content.
func (c Content) Hash() [32]byte { return HashInputs(c.Cert, c.Key, c.CA) }

// HashInputs returns the SHA-256 of the inputs' data in an unambiguous encoding: each
// input is written as a presence flag and a length prefix followed by its bytes, so
// moving bytes between inputs always changes the hash. Names are not hashed.
func HashInputs(ins ...Input) [32]byte {
	h := sha256.New()
	var hdr [9]byte
	for _, in := range ins {
		hdr[0] = 0
		if in.Present() {
			hdr[0] = 1
		}
		binary.BigEndian.PutUint64(hdr[1:], uint64(len(in.Data)))
		h.Write(hdr[:])
		h.Write(in.Data)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
