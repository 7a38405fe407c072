package demo

import (
	"fmt"
	"slices"
	"strings"
)

// invariant is a check of the counts of every safe phase, and what the summary
// claims once it held.
type invariant struct {
	claim string
	// broken says how pr breaks it ("" when it held).
	broken func(pr PhaseResult) string
}

// invariants are what every safe phase must hold.
var invariants = []invariant{
	{claim: "no failed handshake", broken: func(pr PhaseResult) string {
		return brokenIf(pr.Failures > 0, "%d failed handshakes (want 0)", pr.Failures)
	}},
	{claim: "no unexpected drop", broken: func(pr PhaseResult) string {
		return brokenIf(pr.UnexpectedDrops > 0, "%d unexpected stream drops (want 0)", pr.UnexpectedDrops)
	}},
	{claim: "no agent token refused", broken: func(pr PhaseResult) string {
		return brokenIf(pr.Rejected > 0, "%d connection attempts refused for their token (want 0)", pr.Rejected)
	}},
}

func brokenIf(broken bool, format string, args ...any) string {
	if !broken {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

// check judges a phase that finished. A safe phase must hold every invariant and
// its run must succeed (its run checks what its claim says); pr.Claims gets the
// claims of the checks that ran and held, so the summary claims nothing else.
func check(ph phase, pr *PhaseResult) (broken []string) {
	if !ph.safe {
		return nil
	}
	for _, inv := range invariants {
		if inv.broken(*pr) == "" {
			pr.Claims = append(pr.Claims, inv.claim)
		}
	}
	if pr.Err == nil && ph.claim != "" {
		pr.Claims = append(pr.Claims, ph.claim)
	}
	return brokenIn(*pr)
}

// brokenIn lists how pr breaks the invariants, its run error first.
func brokenIn(pr PhaseResult) []string {
	var b []string
	if pr.Err != nil {
		b = append(b, fmt.Sprintf("%s: %v", pr.Name, pr.Err))
	}
	for _, inv := range invariants {
		if why := inv.broken(pr); why != "" {
			b = append(b, pr.Name+": "+why)
		}
	}
	return b
}

// claims lists, once each and in order, what the phases that ran checked and held.
func claims(phases []PhaseResult) string {
	var c []string
	for _, ph := range phases {
		for _, claim := range ph.Claims {
			if !slices.Contains(c, claim) {
				c = append(c, claim)
			}
		}
	}
	return strings.Join(c, ", ")
}
