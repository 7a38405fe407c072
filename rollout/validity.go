package rollout

import (
	"strings"
	"time"

	"github.com/hotcert/hotcert"
)

// Validity is the validity period of a leaf certificate: what a workload's
// rollout windows are weighed against (a change waits for a window only while
// the certificate the pods run is far from its NotAfter). It holds dates
// only, never key material.
type Validity struct {
	NotBefore, NotAfter time.Time
}

// Lifetime is NotAfter - NotBefore.
func (v Validity) Lifetime() time.Duration { return v.NotAfter.Sub(v.NotBefore) }

// IsZero reports whether v names no certificate.
func (v Validity) IsZero() bool { return v.NotAfter.IsZero() }

// leafValidities returns, per key ending in .crt or .pem whose first
// certificate is not a CA (a leaf, or the leaf of a chain), that
// certificate's validity. CA bundles have none: their expiry is a
// rotation's business, not a restart's. Unparsable content has none either
// (CheckTLS reports it).
func leafValidities(data map[string][]byte) map[string]Validity {
	var out map[string]Validity
	for k, v := range data {
		if !strings.HasSuffix(k, ".crt") && !strings.HasSuffix(k, ".pem") || len(v) == 0 {
			continue
		}
		certs, err := hotcert.ParseCertificates(hotcert.Input{Name: k, Data: v})
		if err != nil || len(certs) == 0 || certs[0].IsCA {
			continue
		}
		if out == nil {
			out = map[string]Validity{}
		}
		out[k] = Validity{NotBefore: certs[0].NotBefore, NotAfter: certs[0].NotAfter}
	}
	return out
}
