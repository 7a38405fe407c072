package agentrpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Reasons a TLS handshake or a connection attempt failed: stable values for metric
// labels, alerts and log attributes.
const (
	ReasonUnknownAuthority = "unknown_authority"     // the peer's chain does not reach a trusted CA
	ReasonHostname         = "hostname"              // the certificate does not name the host dialed
	ReasonExpired          = "expired"               // the certificate is expired or not yet valid
	ReasonInvalid          = "invalid"               // another x509 verification failure (usage, constraints, ...)
	ReasonPeerRejected     = "peer_rejected"         // the peer sent a TLS alert: it refused our certificate or parameters
	ReasonNoClientCert     = "no_client_certificate" // (server side) the client sent no certificate, mTLS requires one
	ReasonALPN             = "alpn"                  // no common ALPN protocol (grpc-go requires h2)
	ReasonNotTLS           = "not_tls"               // the peer does not speak TLS
	ReasonTimeout          = "timeout"               // the handshake or dial did not finish in time
	ReasonUnreachable      = "unreachable"           // connection refused, reset or closed before the handshake ended
	ReasonOther            = "other"

	// ReasonUnauthenticated: the TLS handshake succeeded but the control plane refused
	// the agent's bearer token (missing, expired, signed by a key it does not accept,
	// or issued to another agent), or the agent had no token to present.
	ReasonUnauthenticated = "unauthenticated"
)

// HandshakeReason classifies a TLS handshake or dial error into one of the Reason
// constants. It looks at typed errors first and falls back on the message, which is
// all that is left once gRPC has wrapped the error in a status. A gRPC
// Unauthenticated status (a refused bearer token) is ReasonUnauthenticated.
func HandshakeReason(err error) string {
	if err == nil {
		return ""
	}
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unauthenticated {
		return ReasonUnauthenticated
	}
	var (
		ua   x509.UnknownAuthorityError
		host x509.HostnameError
		inv  x509.CertificateInvalidError
		alt  tls.AlertError
		rh   tls.RecordHeaderError
		ne   net.Error
	)
	switch {
	case errors.As(err, &ua):
		return ReasonUnknownAuthority
	case errors.As(err, &host):
		return ReasonHostname
	case errors.As(err, &inv):
		if inv.Reason == x509.Expired {
			return ReasonExpired
		}
		return ReasonInvalid
	case errors.As(err, &alt):
		return ReasonPeerRejected
	case errors.As(err, &rh):
		return ReasonNotTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ReasonTimeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return ReasonUnreachable
	case errors.As(err, &ne) && ne.Timeout():
		return ReasonTimeout
	}
	return reasonFromText(err.Error())
}

func reasonFromText(s string) string {
	switch {
	case strings.Contains(s, "certificate signed by unknown authority"):
		return ReasonUnknownAuthority
	case strings.Contains(s, "x509: certificate is valid for"), strings.Contains(s, "x509: certificate is not valid for any names"):
		return ReasonHostname
	case strings.Contains(s, "x509: certificate has expired or is not yet valid"):
		return ReasonExpired
	case strings.Contains(s, "x509:"):
		return ReasonInvalid
	case strings.Contains(s, "remote error: tls:"):
		return ReasonPeerRejected
	case strings.Contains(s, "client didn't provide a certificate"):
		return ReasonNoClientCert
	case strings.Contains(s, "ALPN"), strings.Contains(s, "application protocol"):
		return ReasonALPN
	case strings.Contains(s, "first record does not look like a TLS handshake"):
		return ReasonNotTLS
	case strings.Contains(s, "deadline exceeded"), strings.Contains(s, "i/o timeout"):
		return ReasonTimeout
	case strings.Contains(s, "connection refused"), strings.Contains(s, "connection reset"),
		strings.Contains(s, "EOF"), strings.Contains(s, "use of closed network connection"), strings.Contains(s, "broken pipe"),
		strings.Contains(s, "no such host"):
		return ReasonUnreachable
	}
	return ReasonOther
}
