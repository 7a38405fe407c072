package file

import (
	"encoding/pem"
	"fmt"
	"strings"

	"github.com/hotcert/hotcert"
)

// splitCredentialBundle splits a credential bundle — one file holding a private key
// and its certificate chain, in either order, as the kubelet writes a
// podCertificate volume's credentialBundlePath — into the chain (its certificates,
// in file order) and the key (its private key block, with any parameter block),
// both named after the file, so that validation reports on them as on a key pair.
// The file follows hotcert's PEM grammar (hotcert.DecodePEM); a block that is
// neither a certificate nor a key is refused.
//
// What concerns the bundle as a whole — a part missing, two keys, an encrypted key
// — is said here, of the bundle and with its block numbers: validation would speak
// of a key file the user never configured, and number the key's blocks alone.
func splitCredentialBundle(in hotcert.Input) (chain, key hotcert.Input, err error) {
	blocks, err := hotcert.DecodePEM(in)
	if err != nil {
		return chain, key, err
	}
	bundleErr := func(reason hotcert.Reason, format string, args ...any) error {
		return &hotcert.Error{Input: in.Name, Reason: reason, Detail: "credential bundle " + fmt.Sprintf(format, args...)}
	}
	var certs, keys []byte
	nkeys := 0
	for i, b := range blocks {
		switch {
		case b.Type == "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(b)...)
		case hotcert.IsEncryptedKey(b):
			return chain, key, bundleErr(hotcert.ReasonParse, "holds an encrypted private key (PEM block %d); an unencrypted key is needed", i+1)
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			nkeys++
			keys = append(keys, pem.EncodeToMemory(b)...)
		case strings.HasSuffix(b.Type, " PARAMETERS"):
			keys = append(keys, pem.EncodeToMemory(b)...)
		default:
			return chain, key, bundleErr(hotcert.ReasonPEM, "holds a private key and its certificate chain, but PEM block %d is a %q", i+1, b.Type)
		}
	}
	switch {
	case certs == nil && nkeys == 0:
		return chain, key, bundleErr(hotcert.ReasonEmpty, "holds no private key and no certificate")
	case nkeys == 0:
		return chain, key, bundleErr(hotcert.ReasonIncomplete, "holds a certificate chain but no private key")
	case certs == nil:
		return chain, key, bundleErr(hotcert.ReasonIncomplete, "holds a private key but no certificate")
	case nkeys > 1:
		return chain, key, bundleErr(hotcert.ReasonPEM, "holds %d private keys; it holds exactly one, the key of its leaf certificate", nkeys)
	}
	return hotcert.Input{Name: in.Name, Data: certs}, hotcert.Input{Name: in.Name, Data: keys}, nil
}
