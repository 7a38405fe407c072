package inspect

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/source/file"
)

// FilesOptions name the files to check, as a server or agent is configured.
type FilesOptions struct {
	CertFile, KeyFile string
	CAFile            string
}

// FilesReport is the result of Files.
type FilesReport struct {
	OK bool `json:"ok"`
	// Source names the files, as the reloader's log lines do.
	Source string `json:"source"`
	// Certificate is the leaf and Chain every certificate of the chain file, leaf
	// first (when a key pair was checked and it loaded).
	Certificate *Certificate  `json:"certificate,omitempty"`
	Chain       []Certificate `json:"chain,omitempty"`
	// CABundle lists the CAs of the bundle, in file order.
	CABundle []Certificate `json:"ca_bundle,omitempty"`
	// ChainsToBundle says whether the leaf verifies against the bundle (both given).
	// It is informational: the reloader does not require it.
	ChainsToBundle *Check `json:"chains_to_bundle,omitempty"`
	// NeverUpdated lists the files a Kubernetes subPath mount put in place:
	// an update of their Secret or ConfigMap never reaches them, only a
	// restart of the container does.
	NeverUpdated []string `json:"never_updated,omitempty"`
	// Warnings says what, although the reloader loads it, is wrong with the key
	// pair as a serving certificate: a CA certificate (CA:TRUE), no
	// subjectAltName, extended key usages without serverAuth.
	Warnings []string `json:"warnings,omitempty"`
	// Input, Reason and Error describe why the files do not load (OK false).
	Input  string `json:"input,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Files reads the files with the file source and runs hotcert.Validate on them:
// the very code path of the reloader, so size caps, file-type checks, PEM parsing,
// key match, validity windows and bundle rules are the same. The report describes
// the material, or why it does not load; the error is non-nil in the latter case.
func Files(ctx context.Context, opts FilesOptions) (*FilesReport, error) {
	var fo []file.Option
	if opts.CertFile != "" || opts.KeyFile != "" {
		fo = append(fo, file.WithKeyPair(opts.CertFile, opts.KeyFile))
	}
	if opts.CAFile != "" {
		fo = append(fo, file.WithCA(opts.CAFile))
	}
	src, err := file.New(fo...)
	if err != nil {
		return nil, err
	}
	rep := &FilesReport{Source: src.String(), NeverUpdated: src.NeverUpdated()}
	c, err := src.Read(ctx)
	var m *hotcert.Material
	if err == nil {
		m, err = hotcert.Validate(c)
	}
	if err != nil {
		rep.Reason, rep.Error = string(hotcert.ReasonOf(err)), err.Error()
		var he *hotcert.Error
		if errors.As(err, &he) {
			rep.Input = he.Input
		}
		return rep, err
	}
	rep.OK = true
	if m.HasIdentity() {
		d := Describe(m.Leaf())
		rep.Certificate = &d
		rep.Warnings = servingWarnings(m.Leaf())
		rep.Chain = DescribeAll(m.Chain())
	}
	if m.HasTrust() {
		rep.CABundle = DescribeAll(m.TrustCertificates())
	}
	if m.HasIdentity() && m.HasTrust() {
		_, verr := hotcert.VerifyChain(m.Chain(), x509.VerifyOptions{Roots: m.TrustPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		ch := checkOf(verr)
		rep.ChainsToBundle = &ch
	}
	return rep, nil
}

// Summary is a one-line description of a report, for logs and exit messages.
func (r *FilesReport) Summary() string {
	if !r.OK {
		return r.Error
	}
	switch {
	case r.Certificate != nil && len(r.CABundle) > 0:
		return fmt.Sprintf("ok: %s serial %s, %d CA(s) in the bundle", r.Certificate.Subject, r.Certificate.Serial, len(r.CABundle))
	case r.Certificate != nil:
		return fmt.Sprintf("ok: %s serial %s", r.Certificate.Subject, r.Certificate.Serial)
	default:
		return fmt.Sprintf("ok: %d CA(s) in the bundle", len(r.CABundle))
	}
}
