package hotcert

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
)

// The PEM grammar of every hotcert input (certificate chains, CA bundles, private
// key files, public key files), in one place so that the reloader, `hotcert check`,
// the rollout controller and the JWT keys agree on what a file means:
//
//   - text outside blocks is allowed and ignored (system CA bundles carry comments,
//     `openssl x509 -text` puts the decoded certificate before its block);
//   - every "-----BEGIN " must start a line and a well-formed block that ends with
//     its matching END line: a truncated or garbled block is an error naming it, never
//     skipped (encoding/pem alone would skip it and carry on with the next block);
//     an END line without its BEGIN is an error too (the tail of a cut block);
//   - a line outside blocks that starts with a dash is not text: it is what is left
//     of a marker cut short ("-", "-----BEGIN" when a write stopped inside the next
//     block's BEGIN line), an error, so a bundle read in the middle of a
//     non-atomic write is refused rather than published without its last CA;
//   - parameter blocks ("EC PARAMETERS", "DH PARAMETERS", ...) are skipped, as
//     crypto/tls skips them: `openssl ecparam -genkey` writes one before the key;
//   - every other block must be of the kind the input holds: certificates in a
//     chain or bundle, exactly one private key in a key file, public keys in a
//     public key file.
//
// Errors are [*Error] values naming the input and the block (its number and line);
// none contains the bytes of a block.

var (
	pemBegin = []byte("-----BEGIN ")
	pemEnd   = []byte("-----END ")
)

// DecodePEM returns every PEM block of in, in order, parameter blocks included,
// following the grammar above: text outside blocks is skipped, and a BEGIN line
// that does not start a well-formed block, or an END line without its BEGIN, is an
// error. Input without any block returns no blocks and no error.
func DecodePEM(in Input) ([]*pem.Block, error) {
	var blocks []*pem.Block
	rest := in.Data
	for n := 1; ; n++ {
		i := bytes.Index(rest, pemBegin)
		text := rest
		if i >= 0 {
			text = rest[:i]
		}
		if j := bytes.Index(text, pemEnd); j >= 0 {
			return nil, newError(in.Name, ReasonPEM, nil, "an END line at line %d has no BEGIN line (a cut block?)", lineOf(in.Data, rest, j))
		}
		if j := dashLine(in.Data, rest, text); j >= 0 {
			return nil, newError(in.Name, ReasonPEM, nil, "line %d starts with dashes but is not a whole BEGIN or END line (a cut block?)", lineOf(in.Data, rest, j))
		}
		if i < 0 {
			return blocks, nil
		}
		start := rest[i:]
		if pos := len(in.Data) - len(rest) + i; pos > 0 && in.Data[pos-1] != '\n' {
			// encoding/pem (and so crypto/tls) sees no block here: neither do we,
			// but it is not text to skip either.
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d (%s, line %d) does not begin at the start of a line", n, beginKind(start), lineOf(in.Data, rest, i))
		}
		b, after := pem.Decode(start)
		// pem.Decode skips a malformed block and returns the next good one: the
		// block it returns must be the one that begins here.
		if b == nil || bytes.Count(start[:len(start)-len(after)], pemBegin) != 1 {
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d (%s, line %d) is malformed or truncated", n, beginKind(start), lineOf(in.Data, rest, i))
		}
		blocks = append(blocks, b)
		rest = after
	}
}

// ParseCertificates parses every certificate of a chain or bundle in, in order,
// following the PEM grammar of [DecodePEM]: a block that is not a certificate
// (parameter blocks aside) or does not parse with x509.ParseCertificate rejects
// the whole input, so a bundle whose second CA is broken is never silently
// shortened (x509.CertPool.AppendCertsFromPEM would keep the first). Input without
// any certificate is a [ReasonEmpty] error.
func ParseCertificates(in Input) ([]*x509.Certificate, error) {
	return parseCertificates(in, "")
}

// parseCertificates is [ParseCertificates] with what ("CA bundle", "certificate
// chain") named in its errors.
func parseCertificates(in Input, what string) ([]*x509.Certificate, error) {
	of := ""
	if what != "" {
		of = " of the " + what
	}
	blocks, err := DecodePEM(in)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for i, b := range blocks {
		if isParameters(b.Type) {
			continue
		}
		if b.Type != "CERTIFICATE" {
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d%s is %s, not a CERTIFICATE", i+1, of, blockKind(b.Type))
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, newError(in.Name, ReasonParse, err, "certificate %d%s does not parse", len(certs)+1, of)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		if what == "" {
			what = "input"
		}
		return nil, newError(in.Name, ReasonEmpty, nil, "%s holds no certificate", what)
	}
	return certs, nil
}

// ParsePrivateKey parses the one private key of a key file: PKCS #8 ("PRIVATE
// KEY"), PKCS #1 ("RSA PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY"), unencrypted,
// following the PEM grammar of [DecodePEM] (an `EC PARAMETERS` block before the key
// is skipped). No key is a [ReasonEmpty] error; two keys, or a block of another
// kind, a [ReasonPEM] error; an encrypted or unparsable key a [ReasonParse] error.
func ParsePrivateKey(in Input) (crypto.Signer, error) {
	blocks, err := DecodePEM(in)
	if err != nil {
		return nil, err
	}
	var key *pem.Block
	keys := 0
	for i, b := range blocks {
		switch {
		case isParameters(b.Type):
			continue
		case IsEncryptedKey(b):
			return nil, newError(in.Name, ReasonParse, nil, "private key (PEM block %d) is encrypted; an unencrypted key is needed", i+1)
		case b.Type == "PRIVATE KEY", b.Type == "RSA PRIVATE KEY", b.Type == "EC PRIVATE KEY":
			key = b
			keys++
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d is a private key of a kind that is not supported (want PKCS #8, PKCS #1 RSA or SEC 1 EC, unencrypted)", i+1)
		default:
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d is %s, not a private key", i+1, blockKind(b.Type))
		}
	}
	switch {
	case keys == 0 && len(bytes.TrimSpace(in.Data)) == 0:
		return nil, newError(in.Name, ReasonEmpty, nil, "is empty; want a private key")
	case keys == 0:
		return nil, newError(in.Name, ReasonEmpty, nil, "holds no private key")
	case keys > 1:
		return nil, newError(in.Name, ReasonPEM, nil, "holds %d private keys; want exactly one, the key of the certificate", keys)
	}
	priv, err := parseKeyDER(key)
	if err != nil {
		// x509's parse errors describe the structure, never the key's bytes.
		return nil, newError(in.Name, ReasonParse, err, "private key does not parse")
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		return nil, newError(in.Name, ReasonParse, nil, "private key of type %T cannot sign", priv)
	}
	return signer, nil
}

// IsEncryptedKey reports whether b is an encrypted private key: a PKCS #8
// "ENCRYPTED PRIVATE KEY" block, or a legacy OpenSSL key whose Proc-Type header
// marks it encrypted. [ParsePrivateKey] refuses such a key; without its
// passphrase nothing more can be checked about it.
func IsEncryptedKey(b *pem.Block) bool {
	return b.Type == "ENCRYPTED PRIVATE KEY" || strings.HasSuffix(b.Type, "PRIVATE KEY") && b.Headers["Proc-Type"] != ""
}

// parseKeyDER parses a private key block as crypto/tls does (PKCS #1, PKCS #8,
// then SEC 1, whatever the label says), reporting the error of the parser its
// label names when none succeeds.
func parseKeyDER(b *pem.Block) (any, error) {
	if k, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	switch b.Type {
	case "RSA PRIVATE KEY":
		_, err := x509.ParsePKCS1PrivateKey(b.Bytes)
		return nil, err
	case "EC PRIVATE KEY":
		_, err := x509.ParseECPrivateKey(b.Bytes)
		return nil, err
	default:
		_, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		return nil, err
	}
}

// ParsePublicKeys parses every public key of a public key file in, in order:
// PKIX ("PUBLIC KEY") or PKCS #1 ("RSA PUBLIC KEY"), following the PEM grammar of
// [DecodePEM]. A block of another kind is a [ReasonPEM] error, a key that does not
// parse a [ReasonParse] error, and input without any key a [ReasonEmpty] error.
func ParsePublicKeys(in Input) ([]crypto.PublicKey, error) {
	blocks, err := DecodePEM(in)
	if err != nil {
		return nil, err
	}
	var keys []crypto.PublicKey
	for i, b := range blocks {
		var (
			pub any
			err error
		)
		switch b.Type {
		case "PUBLIC KEY":
			pub, err = x509.ParsePKIXPublicKey(b.Bytes)
		case "RSA PUBLIC KEY":
			pub, err = x509.ParsePKCS1PublicKey(b.Bytes)
		default:
			if isParameters(b.Type) {
				continue
			}
			return nil, newError(in.Name, ReasonPEM, nil, "PEM block %d is %s, not a PUBLIC KEY", i+1, blockKind(b.Type))
		}
		if err != nil {
			return nil, newError(in.Name, ReasonParse, err, "public key %d (PEM block %d) does not parse", len(keys)+1, i+1)
		}
		keys = append(keys, pub)
	}
	if len(keys) == 0 {
		return nil, newError(in.Name, ReasonEmpty, nil, "holds no public key")
	}
	return keys, nil
}

// isParameters reports whether a block type is a parameters block ("EC
// PARAMETERS", "DH PARAMETERS", "X9.42 DH PARAMETERS"), which every input skips.
func isParameters(typ string) bool { return strings.HasSuffix(typ, " PARAMETERS") }

// blockKind names a PEM block type for an error message. Key types are named
// generically so that error output never even looks like key material.
func blockKind(typ string) string {
	if strings.Contains(typ, "PRIVATE KEY") {
		return "a private key"
	}
	return fmt.Sprintf("a %q", typ)
}

// beginKind names the block a BEGIN line at the start of b announces, for an error
// about that block: its type when the line is intact and plausible, else "a
// garbled BEGIN line".
func beginKind(b []byte) string {
	line, _, _ := bytes.Cut(b[len(pemBegin):], []byte("\n"))
	typ, ok := bytes.CutSuffix(bytes.TrimRight(line, "\r \t"), []byte("-----"))
	if !ok || len(typ) == 0 || len(typ) > 40 || bytes.IndexFunc(typ, func(r rune) bool {
		return !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ' ' || r == '.' || r == '-')
	}) >= 0 {
		return "a garbled BEGIN line"
	}
	return blockKind(string(typ))
}

// dashLine returns the offset in rest of the first line of text (a prefix of rest,
// itself a suffix of all) that starts with a dash, or -1. Text outside blocks
// never needs one, and every whole marker is handled before: such a line is a
// marker cut short.
func dashLine(all, rest, text []byte) int {
	if len(text) > 0 && text[0] == '-' {
		if pos := len(all) - len(rest); pos == 0 || all[pos-1] == '\n' {
			return 0
		}
	}
	if j := bytes.Index(text, []byte("\n-")); j >= 0 {
		return j + 1
	}
	return -1
}

// lineOf returns the 1-based line number, in all, of offset off in rest, a suffix
// of all.
func lineOf(all, rest []byte, off int) int {
	pos := len(all) - len(rest) + off
	return bytes.Count(all[:pos], []byte("\n")) + 1
}

// EncodeCertificates encodes certs as CERTIFICATE blocks, in order: a bundle
// that [ParseCertificates] reads back.
func EncodeCertificates(certs ...*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}
