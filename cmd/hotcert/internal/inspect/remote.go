package inspect

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
	"github.com/hotcert/hotcert/source/file"
)

// RemoteOptions say what to dial and what to verify.
type RemoteOptions struct {
	// Address is host:port of one replica (a pod, not a load-balanced Service).
	Address string
	// ServerName is sent as SNI and is the name the certificate must match. Empty:
	// the host of Address (sent as SNI only when it is a DNS name, as agents do).
	ServerName string
	// CAFile is a CA bundle (the agents' ca.crt); each CA in it is tried on its own.
	CAFile string
	// Bundle, when CAFile is empty, is a CA bundle already loaded ([LoadBundle]),
	// tried CA by CA in the same way.
	Bundle *hotcert.Material
	// NextProtos are the ALPN protocols offered (default "h2", as gRPC clients do).
	NextProtos []string
	// Timeout bounds the dial and handshake (default 10s).
	Timeout time.Duration
}

// RemoteReport is what a replica serves.
type RemoteReport struct {
	// OK says whether an agent would accept the replica: the certificate names
	// VerifyName and, with a bundle, a CA of it verifies the chain.
	OK      bool   `json:"ok"`
	Address string `json:"address"`
	// SNI is the server name sent in the handshake ("" when none was sent).
	SNI string `json:"sni"`
	// VerifyName is the name the certificate was checked against.
	VerifyName  string `json:"verify_name"`
	TLSVersion  string `json:"tls_version"`
	CipherSuite string `json:"cipher_suite"`
	// ALPN is the negotiated protocol; gRPC clients (grpc-go >= 1.67) need "h2".
	ALPN string `json:"alpn"`
	// Certificate is the leaf the replica serves.
	Certificate Certificate `json:"certificate"`
	// Chain is every certificate the replica sent, leaf first.
	Chain []Certificate `json:"chain"`
	// Hostname says whether the leaf names VerifyName.
	Hostname Check `json:"hostname"`
	// Bundle is the verification against each CA of CAFile (absent without one).
	Bundle   *BundleResult `json:"ca_bundle,omitempty"`
	Warnings []string      `json:"warnings,omitempty"`
}

// Check is the outcome of one verification step.
type Check struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// BundleResult is the verification of the served chain against a CA bundle.
type BundleResult struct {
	File string `json:"file"`
	// Verified is true when at least one CA verifies the chain and the hostname
	// matches: what an agent with this bundle would accept.
	Verified bool       `json:"verified"`
	CAs      []CAResult `json:"cas"`
}

// CAResult is the verification of the served chain against one CA of the bundle.
type CAResult struct {
	Index int         `json:"index"`
	CA    Certificate `json:"ca"`
	Chain Check       `json:"chain"`
}

// Remote dials opts.Address and reports what it serves. It fetches the chain with
// verification turned off, then verifies it explicitly against each CA of the
// bundle and the expected name, so it reports even a chain no agent would accept.
// An error means the replica could not be reached or the bundle could not be read;
// a chain that does not verify is reported, not an error (see BundleResult.Verified).
func Remote(ctx context.Context, opts RemoteOptions) (*RemoteReport, error) {
	host, _, err := net.SplitHostPort(opts.Address)
	if err != nil {
		return nil, fmt.Errorf("inspect: address %q: want host:port", opts.Address)
	}
	bundle := opts.Bundle
	if opts.CAFile != "" {
		bundle, err = readBundle(ctx, opts.CAFile)
		if err != nil {
			return nil, err
		}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	protos := opts.NextProtos
	if len(protos) == 0 {
		protos = []string{"h2"}
	}
	rep := &RemoteReport{Address: opts.Address, VerifyName: opts.ServerName}
	if rep.VerifyName == "" {
		rep.VerifyName = host
	}
	if net.ParseIP(rep.VerifyName) == nil {
		rep.SNI = rep.VerifyName // Go (and agents) send no SNI for an IP address
	}

	// Verification is off only to fetch the chain, which is verified below per CA,
	// with the expected name passed explicitly.
	cfg := &tls.Config{InsecureSkipVerify: true, ServerName: rep.SNI, NextProtos: protos, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", opts.Address)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			why := op.Err
			var se *os.SyscallError
			if errors.As(why, &se) {
				why = se.Err // "connection refused", not "connect: connection refused"
			}
			return nil, fmt.Errorf("inspect: %s: cannot connect: %w", opts.Address, why)
		}
		return nil, fmt.Errorf("inspect: TLS handshake with %s: %w", opts.Address, err)
	}
	st := conn.(*tls.Conn).ConnectionState()
	conn.Close()
	if len(st.PeerCertificates) == 0 {
		return nil, fmt.Errorf("inspect: %s presented no certificate", opts.Address)
	}
	rep.TLSVersion = tls.VersionName(st.Version)
	rep.CipherSuite = tls.CipherSuiteName(st.CipherSuite)
	rep.ALPN = st.NegotiatedProtocol
	leaf := st.PeerCertificates[0]
	rep.Certificate = Describe(leaf)
	rep.Chain = DescribeAll(st.PeerCertificates)
	rep.Hostname = checkOf(leaf.VerifyHostname(rep.VerifyName))

	now := time.Now()
	if rep.ALPN != "h2" {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("ALPN %q negotiated, not h2: gRPC clients (grpc-go >= 1.67) refuse this connection", rep.ALPN))
	}
	if now.After(leaf.NotAfter) || now.Before(leaf.NotBefore) {
		rep.Warnings = append(rep.Warnings, "the served certificate is outside its validity window")
	}
	if bundle != nil {
		rep.Bundle = verifyAgainst(opts.CAFile, bundle, st.PeerCertificates, rep.Hostname.OK, now)
	}
	rep.OK = rep.Hostname.OK && (rep.Bundle == nil || rep.Bundle.Verified)
	return rep, nil
}

// readBundle reads a CA bundle with the file source and validates it, exactly as an
// agent loads its ca.crt.
func readBundle(ctx context.Context, path string) (*hotcert.Material, error) {
	src, err := file.New(file.WithCA(path))
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	c, err := src.Read(ctx)
	if err == nil {
		var m *hotcert.Material
		if m, err = hotcert.Validate(c, hotcert.WithRequireTrust()); err == nil {
			return m, nil
		}
	}
	return nil, fmt.Errorf("inspect: CA bundle: %w", err)
}

func verifyAgainst(path string, bundle *hotcert.Material, chain []*x509.Certificate, hostOK bool, now time.Time) *BundleResult {
	res := &BundleResult{File: path}
	for i, ca := range bundle.TrustCertificates() {
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		_, err := hotcert.VerifyChain(chain, x509.VerifyOptions{
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		r := CAResult{Index: i + 1, CA: Describe(ca), Chain: checkOf(err)}
		res.CAs = append(res.CAs, r)
		if r.Chain.OK && hostOK {
			res.Verified = true
		}
	}
	return res
}

func checkOf(err error) Check {
	if err == nil {
		return Check{OK: true}
	}
	return Check{Error: err.Error()}
}
