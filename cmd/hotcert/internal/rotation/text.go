package rotation

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes rep for a terminal: the summary first, then the replicas, the
// agents, each step's verdict and the stragglers.
func WriteText(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("%s\n\n", rep.Summary)
	p("old CA:\t%s\t%s\n", rep.OldCA.Name, short(rep.OldCA.SHA256))
	p("new CA:\t%s\t%s\n\n", rep.NewCA.Name, short(rep.NewCA.SHA256))
	p("REPLICA\tADDRESS\tSERVES\tISSUED BY\tAGENTS\n")
	for _, r := range rep.Replicas {
		serves, by := "unreachable: "+r.ServeError, "-"
		if s := r.Serves; s != nil {
			serves = "serial " + s.Serial
			switch {
			case s.IssuedByNew && s.IssuedByOld:
				by = rep.NewCA.Name + " and " + rep.OldCA.Name
			case s.IssuedByNew:
				by = rep.NewCA.Name
			case s.IssuedByOld:
				by = rep.OldCA.Name
			default:
				by = "neither (" + s.Issuer + ")"
			}
		}
		agents := fmt.Sprint(r.Agents)
		switch {
		case r.StatusError != "":
			agents = "unknown: " + r.StatusError
		case r.Departed > 0:
			agents += fmt.Sprintf(" (+%d departed)", r.Departed)
		}
		p("%s\t%s\t%s\t%s\t%s\n", r.Name, r.Address, serves, by, agents)
	}
	a := rep.Agents
	// Each count says what it counts: Unknown (agents that report nothing) and
	// AtStart (agents that report a bundle they read only at start) are two counts.
	p("\nagents:\t%d connected: %d trust %s, %d trust %s, %d report nothing (an older release, reads its bundle only at start), %d report a bundle they read only at start; %d departed, not back yet\n\n",
		a.Total, a.TrustNew, rep.NewCA.Name, a.TrustOld, rep.OldCA.Name, a.Unknown, a.AtStart, a.Departed)
	p("STEP\tSAFE\tDONE\tWHY\n")
	for _, s := range rep.Steps {
		p("%s\t%s\t%s\t%s\n", s.Name, yes(s.Safe), yes(s.Done), s.Why)
	}
	if len(rep.Stragglers) > 0 {
		p("\nstragglers (%s):\n", rep.Next)
		for _, s := range rep.Stragglers {
			where := ""
			if s.Replica != "" {
				where = " (on " + s.Replica + ")"
			}
			p("  %s %s%s:\t%s\n", s.Kind, s.Name, where, s.Reason)
		}
	}
	return tw.Flush()
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func short(fps []string) string {
	out := make([]string, 0, len(fps))
	for _, f := range fps {
		if len(f) > 16 {
			f = f[:16] + "…"
		}
		out = append(out, "sha256 "+f)
	}
	return strings.Join(out, ", ")
}
