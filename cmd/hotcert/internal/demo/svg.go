package demo

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The picture: four panels over one time axis, each with a scale of its own.
//
//  1. the server certificate of each agent's stream (stacked bands, one per
//     certificate, and agents not connected), with the replicas' reloads, refusals
//     and signing-key steps marked above it;
//  2. the CA bundle each agent trusts (stacked bands, one per set of CAs), with the
//     agents' bundle reloads marked above it;
//  3. the CA that issued the leaf each replica serves (stacked bands, replicas);
//  4. TLS handshakes per interval, ok and failed.
//
// Together the bands show a CA rotation's progress: agents by the CAs they trust,
// replicas by the issuer they serve. Phases, forced reconnects and graceful drains
// are vertical lines across the panels. Every band and mark carries its class and phase (data-phase), so a test
// can read the picture back.
const (
	svgWidth, svgHeight = 1240.0, 780.0
	plotLeft, plotRight = 64.0, 300.0 // the legend lives right of the plot
	servedTop, servedH  = 86.0, 210.0
	trustTop, trustH    = 346.0, 130.0
	issuerTop, issuerH  = 520.0, 50.0
	hsTop, hsH          = 610.0, 70.0
	axisY               = hsTop + hsH
	hsBuckets           = 120
)

// Each panel has colours of its own, so that a colour names one band across the
// picture: a certificate, a set of CAs, or an issuer.
var (
	servedColors  = []string{"#4e79a7", "#59a14f", "#76b7b2", "#9c755f", "#edc948", "#b07aa1"}
	trustColors   = []string{"#f28e2b", "#e15759", "#d37295", "#bab0ac", "#ffbe7d"}
	issuerColors  = []string{"#8cd17d", "#499894", "#f1ce63", "#a0cbe8", "#fabfd2"}
	notConnected  = "#d9d9d9"
	markColors    = map[MarkKind]string{MarkReload: "#1f4e99", MarkBundleReload: "#7b3294", MarkFailure: "#d62728", MarkForced: "#e8740c", MarkDrain: "#2ca02c", MarkKeys: "#333333", MarkPhase: "#888888"}
	notConnectedL = "not connected"
)

// WriteSVG draws the timeline as one SVG document.
func (t *Timeline) WriteSVG(w io.Writer, title string) error {
	samples, marks, certs, bundles, issuers, refused := t.snapshot()
	plotW := svgWidth - plotLeft - plotRight
	end := time.Second
	agents, replicas := 1, 1
	for _, s := range samples {
		end = max(end, s.At)
		agents = max(agents, total(s.Served)+s.Disconnected, total(s.Trusted))
		replicas = max(replicas, total(s.Issuers))
	}
	for _, m := range marks {
		end = max(end, m.At)
	}
	x := func(d time.Duration) float64 { return plotLeft + plotW*float64(d)/float64(end) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", svgWidth, svgHeight, svgWidth, svgHeight)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", plotLeft, esc(title))
	fmt.Fprintf(&b, `<text x="%.0f" y="38" fill="#555">which server certificate each agent was served, which CAs it trusts, and which CA issued what each replica serves, over time (one scale per panel)</text>`+"\n", plotLeft)

	// Panels: bands and their own y scales.
	served := func(s Sample) []int {
		v := make([]int, 0, len(certs)+1)
		for _, c := range certs {
			v = append(v, s.Served[c])
		}
		return append(v, s.Disconnected)
	}
	trusted := func(s Sample) []int {
		v := make([]int, 0, len(bundles))
		for _, c := range bundles {
			v = append(v, s.Trusted[c])
		}
		return v
	}
	servedLabels := append(append([]string(nil), certs...), notConnectedL)
	servedFill := func(i int) string {
		if i == len(certs) {
			return notConnected
		}
		return servedColors[i%len(servedColors)]
	}
	panel(&b, "served", "server certificate of each agent's stream (agents)", servedTop, servedH, plotW, agents, samples, x, served, servedLabels, servedFill)
	panel(&b, "trusted", "CA bundle each agent trusts (agents)", trustTop, trustH, plotW, agents, samples, x, trusted, bundles,
		func(i int) string { return trustColors[i%len(trustColors)] })
	issued := func(s Sample) []int {
		v := make([]int, 0, len(issuers))
		for _, c := range issuers {
			v = append(v, s.Issuers[c])
		}
		return v
	}
	panel(&b, "issuer", "CA that issued the certificate each replica serves (replicas)", issuerTop, issuerH, plotW, replicas, samples, x, issued, issuers,
		func(i int) string { return issuerColors[i%len(issuerColors)] })
	handshakes(&b, samples, end, plotW)

	// Time axis.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", plotLeft, axisY, plotLeft+plotW, axisY)
	step := niceStep(end.Seconds())
	for s := 0.0; s <= end.Seconds()+1e-9; s += step {
		xx := x(time.Duration(s * float64(time.Second)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/><text x="%.1f" y="%.1f" text-anchor="middle">%gs</text>`+"\n", xx, axisY, xx, axisY+4, xx, axisY+15, s)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">time since start</text>`+"\n", plotLeft+plotW+12, axisY+15)

	drawMarks(&b, marks, x)
	legend(&b, plotLeft+plotW+24, servedLabels, servedFill, neverServed(refused, certs), bundles, issuers)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// panel draws one stacked-band panel with its y axis (0 to agents).
func panel(b *strings.Builder, class, title string, top, h, plotW float64, agents int, samples []Sample, x func(time.Duration) float64,
	values func(Sample) []int, labels []string, fill func(int) string) {
	y := func(n int) float64 { return top + h - h*float64(n)/float64(agents) }
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold" fill="#333">%s</text>`+"\n", plotLeft, top-20, esc(title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#bbb"/>`+"\n", plotLeft, top, plotW, h)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%d</text><text x="%.1f" y="%.1f" text-anchor="end">%d</text><text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n",
		plotLeft-4, top+4, agents, plotLeft-4, top+h/2+4, agents/2, plotLeft-4, top+h)
	if len(samples) == 0 {
		return
	}
	cum := make([][]int, len(samples)) // cum[i][k]: agents in bands 0..k-1 at sample i
	for i, s := range samples {
		v := values(s)
		cum[i] = make([]int, len(v)+1)
		for k, n := range v {
			cum[i][k+1] = cum[i][k] + n
		}
	}
	for k, label := range labels {
		if k+1 >= len(cum[0]) {
			break
		}
		var pts strings.Builder
		nonEmpty := false
		for i, s := range samples {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(s.At), y(cum[i][k+1]))
			nonEmpty = nonEmpty || cum[i][k+1] > cum[i][k]
		}
		for i := len(samples) - 1; i >= 0; i-- {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(samples[i].At), y(cum[i][k]))
		}
		if !nonEmpty {
			continue
		}
		fmt.Fprintf(b, `<polygon class="band %s" data-label="%s" fill="%s" stroke="none" points="%s"><title>%s</title></polygon>`+"\n",
			class, esc(label), fill(k), strings.TrimSpace(pts.String()), esc(label))
	}
}

// handshakes draws handshakes per interval, ok (green) and failed (red), on a
// scale of their own.
func handshakes(b *strings.Builder, samples []Sample, end time.Duration, plotW float64) {
	okB, failB := make([]float64, hsBuckets), make([]float64, hsBuckets)
	for i := 1; i < len(samples); i++ {
		k := min(hsBuckets-1, int(float64(samples[i].At)/float64(end)*hsBuckets))
		okB[k] += float64(samples[i].HandshakesOK - samples[i-1].HandshakesOK)
		failB[k] += float64(samples[i].HandshakesFailed - samples[i-1].HandshakesFailed)
	}
	peak := 1.0
	for i := range okB {
		peak = max(peak, okB[i]+failB[i])
	}
	per := end.Seconds() / hsBuckets
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-weight="bold" fill="#333">TLS handshakes per %.2fs (green ok, red failed)</text>`+"\n", plotLeft, hsTop-10, per)
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#bbb"/>`+"\n", plotLeft, hsTop, plotW, hsH)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%.0f</text><text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n", plotLeft-4, hsTop+4, peak, plotLeft-4, hsTop+hsH)
	bw := plotW / hsBuckets
	for i := range okB {
		bx := plotLeft + float64(i)*bw
		hOK, hFail := hsH*okB[i]/peak, hsH*failB[i]/peak
		if hOK > 0 {
			fmt.Fprintf(b, `<rect class="bar ok" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#59a14f"/>`+"\n", bx, hsTop+hsH-hOK, math.Max(bw-1, 1), hOK)
		}
		if hFail > 0 {
			fmt.Fprintf(b, `<rect class="bar failed" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#d62728"/>`+"\n", bx, hsTop+hsH-hOK-hFail, math.Max(bw-1, 1), hFail)
		}
	}
}

// drawMarks draws phases, forced reconnects and drains as lines across the panels,
// and reloads, refusals and key steps as symbols above the panel they concern.
func drawMarks(b *strings.Builder, marks []Mark, x func(time.Duration) float64) {
	row := 0
	for _, m := range marks {
		xx := x(m.At)
		c := markColors[m.Kind]
		fmt.Fprintf(b, `<g class="mark %s" data-phase="%s"><title>%s</title>`, m.Kind, esc(m.Phase), esc(m.Label))
		switch m.Kind {
		case MarkPhase:
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`, xx, servedTop, xx, axisY, c)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#333">%s</text>`, xx+3, axisY+30+float64(row%3)*13, esc(m.Label))
			row++
		case MarkForced:
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, xx, servedTop, xx, trustTop+trustH, c)
		case MarkDrain:
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 2"/>`, xx, servedTop, xx, servedTop+servedH, c)
		case MarkReload:
			fmt.Fprintf(b, `<path d="M%.1f,%.1f l-5,-8 h10 z" fill="%s"/>`, xx, servedTop-1, c)
		case MarkKeys:
			fmt.Fprintf(b, `<path d="M%.1f,%.1f l4,-5 l-4,-5 l-4,5 z" fill="%s"/>`, xx, servedTop-1, c)
		case MarkFailure:
			fmt.Fprintf(b, `<path d="M%.1f,%.1f l8,8 m0,-8 l-8,8" stroke="%s" stroke-width="2.5"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1"/>`,
				xx-4, servedTop-10, c, xx, servedTop, xx, servedTop+servedH, c)
		case MarkBundleReload:
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1" opacity="0.6"/>`, xx, trustTop-8, xx, trustTop, c)
		}
		b.WriteString("</g>\n")
	}
}

// legend explains every band and mark.
func legend(b *strings.Builder, lx float64, servedLabels []string, servedFill func(int) string, refused []refusal, bundles, issuers []string) {
	y := servedTop
	line := func(format string, args ...any) {
		fmt.Fprintf(b, format, args...)
		b.WriteString("\n")
		y += 16
	}
	b.WriteString(`<g class="legend">` + "\n")
	line(`<text x="%.1f" y="%.1f" font-weight="bold">server certificate served</text>`, lx, y)
	for i, l := range servedLabels {
		line(`<rect class="legend-entry" x="%.1f" y="%.1f" width="12" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`, lx, y-9, servedFill(i), lx+18, y, esc(l))
	}
	for _, r := range refused { // no band: say why the numbering skips it
		line(`<text class="legend-refused" x="%.1f" y="%.1f" fill="#555"><tspan fill="%s">✕</tspan> %s: never served,</text>`, lx+1, y, markColors[MarkFailure], esc(r.name))
		line(`<text class="legend-refused" x="%.1f" y="%.1f" fill="#555">%s</text>`, lx+18, y, esc(r.why))
	}
	y += 6
	line(`<text x="%.1f" y="%.1f" font-weight="bold">CA bundle trusted</text>`, lx, y)
	for i, l := range bundles {
		line(`<rect class="legend-entry" x="%.1f" y="%.1f" width="12" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`, lx, y-9, trustColors[i%len(trustColors)], lx+18, y, esc(l))
	}
	y += 6
	line(`<text x="%.1f" y="%.1f" font-weight="bold">issuer replicas serve</text>`, lx, y)
	for i, l := range issuers {
		line(`<rect class="legend-entry" x="%.1f" y="%.1f" width="12" height="10" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`, lx, y-9, issuerColors[i%len(issuerColors)], lx+18, y, esc(l))
	}
	y += 6
	line(`<text x="%.1f" y="%.1f" font-weight="bold">marks</text>`, lx, y)
	for _, e := range []struct {
		kind  MarkKind
		shape string
		text  string
	}{
		{MarkReload, `<path d="M%.1f,%.1f l-5,-8 h10 z" fill="%s"/>`, "a replica serves a new certificate"},
		{MarkBundleReload, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`, "an agent loaded a new CA bundle"},
		{MarkFailure, `<path d="M%.1f,%.1f l8,8 m0,-8 l-8,8" stroke="%s" stroke-width="2.5"/>`, "refused (last good kept)"},
		{MarkKeys, `<path d="M%.1f,%.1f l4,-5 l-4,-5 l-4,5 z" fill="%s"/>`, "signing-key rotation step"},
		{MarkDrain, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 2"/>`, "graceful reconnect (drain window)"},
		{MarkForced, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, "forced reconnect (all dropped)"},
		{MarkPhase, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4 3"/>`, "a phase starts"},
	} {
		c := markColors[e.kind]
		var shape string
		switch e.kind {
		case MarkReload, MarkKeys:
			shape = fmt.Sprintf(e.shape, lx+6, y, c)
		case MarkFailure:
			shape = fmt.Sprintf(e.shape, lx+2, y-9, c)
		default:
			shape = fmt.Sprintf(e.shape, lx+6, y-11, lx+6, y+1, c)
		}
		line(`<g class="legend-entry %s">%s<text x="%.1f" y="%.1f">%s</text></g>`, e.kind, shape, lx+18, y, esc(e.text))
	}
	b.WriteString("</g>\n")
}

// neverServed are the refused certificates that have no band.
func neverServed(refused []refusal, served []string) []refusal {
	var out []refusal
	for _, r := range refused {
		if !slices.Contains(served, r.name) {
			out = append(out, r)
		}
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func esc(s string) string { return html.EscapeString(s) }

// niceStep picks a tick step of 1, 2 or 5 times a power of ten giving ~10 ticks.
func niceStep(span float64) float64 {
	raw := span / 10
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}
