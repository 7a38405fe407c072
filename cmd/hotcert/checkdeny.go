package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/source/file"
)

// denyListReport is what `check --deny-list/--crl-file` prints.
type denyListReport struct {
	OK     bool   `json:"ok"`
	Source string `json:"source"`
	// List describes the list that would be enforced (OK true): version, counts, CRLs.
	List *revocation.Info `json:"deny_list,omitempty"`
	// Input, Reason and Error say why the list would be refused (OK false).
	Input  string `json:"input,omitempty"`
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

// checkDenyList validates a deny list and CRL file as the reloader would: CRLs
// against the CA bundle of caFile, at the current time.
func checkDenyList(ctx context.Context, g *globals, denyList, crlFile, caFile string, asJSON bool) error {
	src, err := revocation.Files(denyList, crlFile)
	if err != nil {
		return err
	}
	var trust *hotcert.Material
	if caFile != "" {
		caSrc, err := file.New(file.WithCA(caFile))
		if err != nil {
			return err
		}
		c, err := caSrc.Read(ctx)
		if err == nil {
			trust, err = hotcert.Validate(c, hotcert.WithRequireTrust())
		}
		if err != nil {
			return inUserTerms(fmt.Errorf("the CA bundle CRLs are verified against: %w", err), fileFlags("--ca-file", caFile))
		}
	} else if crlFile != "" {
		return errors.New("--crl-file needs --ca-file: a CRL is accepted only when the CA of the bundle that issued it signed it")
	}
	rep := denyListReport{Source: src.String()}
	c, err := src.Read(ctx)
	var l *revocation.List
	if err == nil {
		l, err = revocation.Validate(c, trust, time.Now())
	}
	if err != nil {
		rep.Reason, rep.Error = string(hotcert.ReasonOf(err)), err.Error()
		var he *hotcert.Error
		if errors.As(err, &he) {
			rep.Input = he.Input
		}
		err = inUserTerms(err, fileFlags("--deny-list", denyList, "--crl-file", crlFile))
	} else {
		in := l.Info()
		rep.OK, rep.List = true, &in
	}
	if asJSON {
		if werr := writeJSON(g.stdout, rep); werr != nil {
			return werr
		}
		return reported(err)
	}
	if werr := writeDenyListReport(g.stdout, rep); werr != nil {
		return werr
	}
	return err
}

func writeDenyListReport(w io.Writer, rep denyListReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "source:  %s\n", rep.Source)
	if !rep.OK {
		fmt.Fprintf(&b, "INVALID (%s): %s\n", rep.Reason, rep.Error)
	} else {
		in := rep.List
		fmt.Fprintf(&b, "version: %s\n", in.Version)
		fmt.Fprintf(&b, "entries: %d serials, %d SPKI hashes\n", in.Serials, in.SPKIs)
		for _, c := range in.CRLs {
			next := "none"
			if !c.NextUpdate.IsZero() {
				next = c.NextUpdate.Format(time.RFC3339)
			}
			fmt.Fprintf(&b, "  CRL of %s (number %s): %d entries, next update %s\n", c.Issuer, c.Number, c.Entries, next)
		}
		b.WriteString("OK: a hotcert deny list would load these files\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
