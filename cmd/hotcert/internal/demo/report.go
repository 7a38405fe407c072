package demo

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// progress prints a live status line on a terminal, plain lines elsewhere.
type progress struct {
	mu       sync.Mutex
	w        io.Writer
	terminal bool
	width    int
}

func newProgress(w io.Writer, terminal bool) *progress { return &progress{w: w, terminal: terminal} }

// status rewrites the live line (terminals only).
func (p *progress) status(format string, args ...any) {
	if !p.terminal {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := fmt.Sprintf(format, args...)
	pad := max(0, p.width-len(s))
	p.width = len(s)
	fmt.Fprintf(p.w, "\r%s%s", s, strings.Repeat(" ", pad))
}

// linef prints a line that stays.
func (p *progress) linef(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.terminal && p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}

func (p *progress) clear() { p.linef("") }

// writeSummary prints the table per phase, where the files are, and what was
// checked: only the phases that ran.
func writeSummary(w io.Writer, res *Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tagents moved by\thandshakes\tfailed\tunexpected drops\tforced drops\ttokens refused\treloads (replicas/agents)\trefused reloads\treload p50\treload p99\tnot connected p50/max\t")
	var all []time.Duration // the reloads of the phases that finished
	for _, ph := range res.Phases {
		notConnected := "-"
		if len(ph.Gaps) > 0 {
			notConnected = ms(ph.NotConnectedP50) + " / " + ms(ph.NotConnectedMax)
			if ph.CPUBound() {
				notConnected += " (CPU-bound)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d / %d\t%d\t%s\t%s\t%s\t\n", ph.Name, ph.Moves, ph.Handshakes, ph.Failures, ph.UnexpectedDrops,
			ph.Forced, ph.Rejected, ph.Reloads, ph.BundleReloads, ph.Refused, ms(ph.ReloadP50), ms(ph.ReloadP99), notConnected)
		all = append(all, ph.ReloadLatencies...)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nagents moved by: graceful drain = each replica ends its streams cleanly at random times within its drain window after it serves a new certificate;")
	fmt.Fprintln(w, "forced reconnect = the demo drops every connection, as a control-plane restart would, so agents re-read their CA bundle (forced drops are not unexpected drops).")
	fmt.Fprintln(w, "not connected = from the end of an agent's stream to its next one (p50 and max over the agents that reconnected in the phase).")
	writeCPUNote(w, res.Phases)
	if len(all) > 0 {
		fmt.Fprintf(w, "\nreload latency (kubelet rename → served) over %d reloads: p50 %s, p99 %s\n", len(all), ms(percentile(all, 0.5)), ms(percentile(all, 0.99)))
	}
	if res.Tokens != "" {
		fmt.Fprintln(w, res.Tokens)
	}
	if res.Spread != "" {
		fmt.Fprintln(w, res.Spread)
	}
	fmt.Fprintf(w, "timeline: %s\nlog:      %s\n", res.Timeline, res.Log)
	fmt.Fprintln(w)
	held := claims(res.Phases)
	switch {
	case len(res.Broken) > 0:
		fmt.Fprintln(w, "BROKEN invariants:")
		for _, b := range res.Broken {
			fmt.Fprintln(w, "  - "+b)
		}
	case len(res.Phases) == 0:
		fmt.Fprintln(w, "interrupted before the first phase finished: nothing was checked.")
	case held == "":
		fmt.Fprintln(w, "no invariant was checked in the phases that ran.")
	case len(res.NotRun) > 0:
		fmt.Fprintf(w, "interrupted: in the %d phases that finished, %s.\nnot run, so not checked: %s.\n", len(res.Phases), held, strings.Join(res.NotRun, ", "))
	default:
		fmt.Fprintf(w, "every invariant held: %s.\n", held)
	}
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

// writeCPUNote says which phases the machine's CPU bound: their times not connected
// are mostly waits for a core, not hotcert's (every agent and replica of the demo
// shares this machine's CPUs, which a real fleet does not).
func writeCPUNote(w io.Writer, phases []PhaseResult) {
	var bound []PhaseResult
	for _, ph := range phases {
		if ph.CPUBound() {
			bound = append(bound, ph)
		}
	}
	if len(bound) == 0 {
		return
	}
	fmt.Fprintf(w, "CPU-bound phases: the machine's CPU, not hotcert, set their pace. A goroutine ready to run waited this long for one of the %d CPUs,\n", runtime.NumCPU())
	fmt.Fprintln(w, "handshakes and reconnects included (every agent and replica of the demo shares this machine); their times not connected are mostly that wait:")
	for _, ph := range bound {
		fmt.Fprintf(w, "  %s: CPU wait p50 %s, p99 %s\n", ph.Name, ms(ph.CPUWaitP50), ms(ph.CPUWaitP99))
	}
}

// metricValue sums the samples of a counter or gauge in the replica's registry.
func metricValue(r *replica, name string) float64 {
	mfs, err := r.reg.Gather()
	if err != nil {
		return -1
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v += value(m)
		}
	}
	return v
}

func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}
