package spiffe

import (
	"bytes"
	"encoding/pem"
	"fmt"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/hotcert/hotcert"
)

// content turns one X.509 context into hotcert content: the chosen SVID's chain
// and key as PEM (go-spiffe's own encoding: CERTIFICATE blocks leaf first, one
// PKCS#8 PRIVATE KEY), and the bundle of its trust domain as a PEM CA bundle
// (an agent always sends it; without it the content has no trust, which
// hotcert.WithRequireTrust refuses). The same context always encodes to the
// same bytes, so the Reloader's content hash sees an unchanged SVID as unchanged.
func (s *Source) content(x *workloadapi.X509Context) (hotcert.Content, error) {
	svid := s.pick(x.SVIDs)
	if svid == nil {
		return hotcert.Content{}, &hotcert.Error{Input: s.name, Reason: hotcert.ReasonMissing,
			Detail: fmt.Sprintf("none of the workload's %d X.509-SVIDs was chosen", len(x.SVIDs))}
	}
	id := svid.ID.String()
	chain, key, err := svid.Marshal()
	if err != nil {
		return hotcert.Content{}, &hotcert.Error{Input: s.name + " X.509-SVID " + id, Reason: hotcert.ReasonParse,
			Detail: "the SVID cannot be encoded", Err: err}
	}
	c := hotcert.Content{
		Cert:   hotcert.Input{Name: s.name + " X.509-SVID " + id, Data: chain},
		Key:    hotcert.Input{Name: s.name + " private key of " + id, Data: key},
		Source: s.name + " (" + id + ")",
	}
	td := svid.ID.TrustDomain()
	if b, ok := x.Bundles.Get(td); ok {
		c.CA = hotcert.Input{Name: s.name + " X.509 bundle of " + td.Name(), Data: bundlePEM(b)}
	}
	return c, nil
}

func (s *Source) pick(svids []*x509svid.SVID) *x509svid.SVID {
	if s.cfg.picker != nil {
		return s.cfg.picker(svids)
	}
	if len(svids) == 0 {
		return nil
	}
	return svids[0]
}

// bundlePEM encodes the authorities of b in order.
func bundlePEM(b *x509bundle.Bundle) []byte {
	var out bytes.Buffer
	for _, ca := range b.X509Authorities() {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}) // cannot fail on a bytes.Buffer
	}
	return out.Bytes()
}
