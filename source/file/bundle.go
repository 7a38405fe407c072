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
func splitCredentialBundle(in hotcert.Input) (chain, key hotcert.Input, err error) {
	blocks, err := hotcert.DecodePEM(in)
	if err != nil {
		return chain, key, err
	}
	var certs, keys []byte
	for i, b := range blocks {
		switch {
		case b.Type == "CERTIFICATE":
			certs = append(certs, pem.EncodeToMemory(b)...)
		case strings.HasSuffix(b.Type, "PRIVATE KEY"), strings.HasSuffix(b.Type, " PARAMETERS"):
			keys = append(keys, pem.EncodeToMemory(b)...)
		default:
			return chain, key, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonPEM,
				Detail: fmt.Sprintf("PEM block %d is a %q: a credential bundle holds a private key and its certificate chain", i+1, b.Type)}
		}
	}
	if certs == nil && keys == nil {
		return chain, key, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonEmpty,
			Detail: "credential bundle holds no private key and no certificate"}
	}
	if certs != nil {
		chain = hotcert.Input{Name: in.Name, Data: certs}
	}
	if keys != nil {
		key = hotcert.Input{Name: in.Name, Data: keys}
	}
	return chain, key, nil
}
