package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteRemote prints a RemoteReport for people.
func WriteRemote(w io.Writer, r *RemoteReport, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	sni := r.SNI
	if sni == "" {
		sni = "(none: IP address)"
	}
	alpn := r.ALPN
	if alpn == "" {
		alpn = "(none)"
	}
	fmt.Fprintf(tw, "address:\t%s\n", r.Address)
	fmt.Fprintf(tw, "sni:\t%s\n", sni)
	fmt.Fprintf(tw, "protocol:\t%s, %s\n", r.TLSVersion, r.CipherSuite)
	fmt.Fprintf(tw, "alpn:\t%s\n", alpn)
	writeCert(tw, "", r.Certificate, now)
	fmt.Fprintf(tw, "chain:\t%d certificate(s) sent\n", len(r.Chain))
	for i, c := range r.Chain[1:] {
		fmt.Fprintf(tw, "  [%d]\t%s (issuer %s, sha256 %s)\n", i+2, c.Subject, c.Issuer, c.SHA256Colon())
	}
	fmt.Fprintf(tw, "hostname %s:\t%s\n", r.VerifyName, checkText(r.Hostname))
	for _, warn := range r.Warnings {
		fmt.Fprintf(tw, "warning:\t%s\n", warn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b := r.Bundle
	if b == nil {
		_, err := fmt.Fprintln(w, "ca bundle: none given (--ca-file): the chain was not verified")
		return err
	}
	fmt.Fprintf(w, "ca bundle %s: %d CA(s), each tried on its own\n", b.File, len(b.CAs))
	for _, ca := range b.CAs {
		fmt.Fprintf(w, "  [%d] %s: chain %s\n", ca.Index, ca.CA.Subject, checkText(ca.Chain))
		fmt.Fprintf(w, "      sha256 %s, not after %s\n", ca.CA.SHA256Colon(), ca.CA.NotAfter.Format(time.RFC3339))
	}
	verdict := "VERIFIED: an agent with this bundle accepts this replica"
	if !b.Verified {
		verdict = "NOT VERIFIED: an agent with this bundle refuses this replica"
	}
	_, err := fmt.Fprintf(w, "result: %s\n", verdict)
	return err
}

// WriteFiles prints a FilesReport for people.
func WriteFiles(w io.Writer, r *FilesReport, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "source:\t%s\n", r.Source)
	for _, f := range r.NeverUpdated {
		fmt.Fprintf(tw, "warning:\t%s is a subPath mount: it will never be updated; a rotation reaches this process only when it restarts (mount the volume's directory instead)\n", f)
	}
	if !r.OK {
		fmt.Fprintf(tw, "result:\tINVALID (%s)\n", r.Reason)
		fmt.Fprintf(tw, "error:\t%s\n", r.Error)
		return tw.Flush()
	}
	if r.Certificate != nil {
		writeCert(tw, "", *r.Certificate, now)
		fmt.Fprintf(tw, "chain:\t%d certificate(s)\n", len(r.Chain))
		for i, c := range r.Chain[1:] {
			fmt.Fprintf(tw, "  [%d]\t%s (issuer %s)\n", i+2, c.Subject, c.Issuer)
		}
	}
	if r.ChainsToBundle != nil {
		fmt.Fprintf(tw, "leaf chains to bundle:\t%s\n", checkText(*r.ChainsToBundle))
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(tw, "warning:\t%s\n", warn)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.CABundle) > 0 {
		fmt.Fprintf(w, "ca bundle: %d CA(s)\n", len(r.CABundle))
		for i, c := range r.CABundle {
			fmt.Fprintf(w, "  [%d] %s\n      sha256 %s, not after %s\n", i+1, c.Subject, c.SHA256Colon(), c.NotAfter.Format(time.RFC3339))
		}
	}
	_, err := fmt.Fprintln(w, "result: OK: the reloader would load these files")
	return err
}

func writeCert(w io.Writer, indent string, c Certificate, now time.Time) {
	fmt.Fprintf(w, "%ssubject:\t%s\n", indent, c.Subject)
	fmt.Fprintf(w, "%sissuer:\t%s\n", indent, c.Issuer)
	fmt.Fprintf(w, "%sserial:\t%s\n", indent, c.Serial)
	fmt.Fprintf(w, "%ssans:\t%s\n", indent, c.SANs())
	fmt.Fprintf(w, "%svalidity:\t%s\n", indent, c.Validity(now))
	fmt.Fprintf(w, "%ssha256:\t%s\n", indent, c.SHA256Colon())
}

func checkText(c Check) string {
	if c.OK {
		return "ok"
	}
	return "FAILS: " + strings.TrimSpace(c.Error)
}
