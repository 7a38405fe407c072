package evidence

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/rollout/internal/census"
)

// Handshaker looks at what a server serves with a real TLS handshake, as a
// client dialing it would, and tells which side of the rotation issued it.
type Handshaker struct {
	// Old and New are the certificates of the two CAs.
	Old, New []*x509.Certificate
	// ServerName is the name clients dial: sent as SNI (unless it is an IP
	// address, for which Go sends none) and checked against the leaf. Empty:
	// no SNI, no name checked.
	ServerName string
	// Timeout bounds one handshake (default 5s).
	Timeout time.Duration
}

// Served dials endpoint ("ip:port") and reports what it serves. Verification
// is off only to fetch the chain, which is then verified explicitly against
// each side's CAs, with the expected name checked on its own, so that a chain
// no client would accept is reported, not an error. Trust alone is judged:
// the chain is verified at a time inside the leaf's validity window.
func (h Handshaker) Served(ctx context.Context, endpoint string) census.Served {
	s := census.Served{Endpoint: endpoint}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	sni := h.ServerName
	if net.ParseIP(sni) != nil {
		sni = ""
	}
	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: sni, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", endpoint)
	if err != nil {
		s.Err = dialError(err)
		return s
	}
	st := conn.(*tls.Conn).ConnectionState()
	_ = conn.Close()
	if len(st.PeerCertificates) == 0 {
		s.Err = "presented no certificate"
		return s
	}
	leaf := st.PeerCertificates[0]
	s.Serial = hotcert.FormatSerial(leaf.SerialNumber)
	s.HostnameOK = h.ServerName == "" || leaf.VerifyHostname(h.ServerName) == nil
	s.IssuedByOld = Verifies(st.PeerCertificates, h.Old)
	s.IssuedByNew = Verifies(st.PeerCertificates, h.New)
	return s
}

// Verifies reports whether chain (leaf first) verifies against one of cas
// for server authentication, at a time inside the leaf's validity window
// (trust alone is judged, not time).
func Verifies(chain []*x509.Certificate, cas []*x509.Certificate) bool {
	if len(cas) == 0 {
		return false
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	leaf := chain[0]
	at := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) / 2)
	_, err := hotcert.VerifyChain(chain, x509.VerifyOptions{Roots: roots, CurrentTime: at, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

// dialError says why a dial failed, briefly: "cannot connect: connection
// refused", "TLS handshake: …".
func dialError(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		why := op.Err
		var se *os.SyscallError
		if errors.As(why, &se) {
			why = se.Err
		}
		return fmt.Sprintf("cannot connect: %v", why)
	}
	return fmt.Sprintf("TLS handshake: %v", err)
}
