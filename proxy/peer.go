package proxy

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"strings"

	proxyproto "github.com/pires/go-proxyproto"
	"github.com/pires/go-proxyproto/tlvparse"
)

// peerHeaderValue describes a verified client leaf as Envoy's
// X-Forwarded-Client-Cert does: Hash (SHA-256 of the DER, hex), Subject (quoted),
// one URI element per URI SAN (a SPIFFE ID among them) and one DNS element per DNS
// SAN, separated by semicolons.
func peerHeaderValue(leaf *x509.Certificate) string {
	sum := sha256.Sum256(leaf.Raw)
	var b strings.Builder
	b.WriteString("Hash=")
	b.WriteString(hex.EncodeToString(sum[:]))
	b.WriteString(`;Subject="`)
	b.WriteString(strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(leaf.Subject.String()))
	b.WriteString(`"`)
	for _, u := range leaf.URIs {
		b.WriteString(";URI=")
		b.WriteString(u.String())
	}
	for _, d := range leaf.DNSNames {
		b.WriteString(";DNS=")
		b.WriteString(d)
	}
	return b.String()
}

// proxyHeader is the PROXY protocol v2 header of a backend connection for client
// connection c: its addresses, and the TLS facts the way ghostunnel's tls-full
// mode and HAProxy send them (PP2_TYPE_SSL with the version, the client's CN and
// its leaf's DER, the SNI as PP2_TYPE_AUTHORITY, the ALPN protocol).
func proxyHeader(c *tls.Conn) ([]byte, error) {
	h := proxyproto.HeaderProxyFromAddrs(2, c.RemoteAddr(), c.LocalAddr())
	cs := c.ConnectionState()
	ssl := tlvparse.PP2SSL{Client: tlvparse.PP2_BITFIELD_CLIENT_SSL,
		TLV: []proxyproto.TLV{{Type: proxyproto.PP2_SUBTYPE_SSL_VERSION, Value: []byte(tls.VersionName(cs.Version))}}}
	if len(cs.PeerCertificates) > 0 {
		leaf := cs.PeerCertificates[0]
		ssl.Client |= tlvparse.PP2_BITFIELD_CLIENT_CERT_CONN | tlvparse.PP2_BITFIELD_CLIENT_CERT_SESS
		if cn := leaf.Subject.CommonName; cn != "" {
			ssl.TLV = append(ssl.TLV, proxyproto.TLV{Type: proxyproto.PP2_SUBTYPE_SSL_CN, Value: []byte(cn)})
		}
		ssl.TLV = append(ssl.TLV, proxyproto.TLV{Type: proxyproto.PP2_SUBTYPE_SSL_CLIENT_CERT, Value: leaf.Raw})
	}
	sslTLV, err := ssl.Marshal()
	if err != nil {
		return nil, err
	}
	tlvs := []proxyproto.TLV{sslTLV}
	if cs.ServerName != "" {
		tlvs = append(tlvs, proxyproto.TLV{Type: proxyproto.PP2_TYPE_AUTHORITY, Value: []byte(cs.ServerName)})
	}
	if cs.NegotiatedProtocol != "" {
		tlvs = append(tlvs, proxyproto.TLV{Type: proxyproto.PP2_TYPE_ALPN, Value: []byte(cs.NegotiatedProtocol)})
	}
	if err := h.SetTLVs(tlvs); err != nil {
		return nil, err
	}
	return h.Format()
}
