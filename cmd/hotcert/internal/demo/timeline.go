package demo

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"sync"
	"time"
)

// MarkKind classifies a timeline mark.
type MarkKind string

// Kinds of marks drawn on the timeline.
const (
	MarkPhase   MarkKind = "phase"   // a phase starts
	MarkReload  MarkKind = "reload"  // a replica or agent loaded new material
	MarkFailure MarkKind = "failure" // a reload was refused (last good kept)
)

// Sample is the state of the system at one instant.
type Sample struct {
	At               time.Duration
	Connected        int
	HandshakesOK     uint64 // cumulative
	HandshakesFailed uint64 // cumulative
}

// Mark is an event drawn as a vertical line.
type Mark struct {
	At    time.Duration
	Kind  MarkKind
	Label string
}

// Timeline records samples and marks and draws them as a self-contained SVG.
type Timeline struct {
	start   time.Time
	mu      sync.Mutex
	samples []Sample
	marks   []Mark
}

// NewTimeline starts a timeline at now.
func NewTimeline() *Timeline { return &Timeline{start: time.Now()} }

// Sample records the current state.
func (t *Timeline) Sample(connected int, ok, failed uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples = append(t.samples, Sample{At: time.Since(t.start), Connected: connected, HandshakesOK: ok, HandshakesFailed: failed})
}

// Mark records an event.
func (t *Timeline) Mark(kind MarkKind, label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.marks = append(t.marks, Mark{At: time.Since(t.start), Kind: kind, Label: label})
}

// Marks returns a copy of the marks recorded so far.
func (t *Timeline) Marks() []Mark {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Mark(nil), t.marks...)
}

// WriteSVG draws connected agents (line), handshakes per bucket (green bars ok, red
// bars failed) and the marks (phases dashed grey with labels, reloads blue, refusals
// red) as one SVG document.
func (t *Timeline) WriteSVG(w io.Writer, title string) error {
	t.mu.Lock()
	samples := append([]Sample(nil), t.samples...)
	marks := append([]Mark(nil), t.marks...)
	t.mu.Unlock()

	const (
		width, height        = 1100.0, 460.0
		left, right, top, bt = 60.0, 20.0, 50.0, 60.0
	)
	plotW, plotH := width-left-right, height-top-bt
	end := time.Second
	for _, s := range samples {
		end = max(end, s.At)
	}
	for _, m := range marks {
		end = max(end, m.At)
	}
	maxConn := 1
	for _, s := range samples {
		maxConn = max(maxConn, s.Connected)
	}
	// Handshakes per bucket, from cumulative counters.
	const buckets = 100
	okB, failB := make([]float64, buckets), make([]float64, buckets)
	for i := 1; i < len(samples); i++ {
		b := min(buckets-1, int(float64(samples[i].At)/float64(end)*buckets))
		okB[b] += float64(samples[i].HandshakesOK - samples[i-1].HandshakesOK)
		failB[b] += float64(samples[i].HandshakesFailed - samples[i-1].HandshakesFailed)
	}
	maxHS := 1.0
	for i := range okB {
		maxHS = max(maxHS, okB[i]+failB[i])
	}
	x := func(d time.Duration) float64 { return left + plotW*float64(d)/float64(end) }
	yConn := func(n int) float64 { return top + plotH - plotH*float64(n)/float64(maxConn) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	fmt.Fprintf(&b, `<text x="%.0f" y="38" fill="#555">black line: agents connected (max %d) · green/red bars: handshakes ok/failed per %.1fs (max %.0f) · blue: reload · red line: refused reload · dashed: phase</text>`+"\n",
		left, maxConn, end.Seconds()/buckets, maxHS)
	// Axes.
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, top+plotH, left+plotW, top+plotH)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, top, left, top+plotH)
	step := niceStep(end.Seconds())
	for s := 0.0; s <= end.Seconds()+1e-9; s += step {
		xx := x(time.Duration(s * float64(time.Second)))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/><text x="%.1f" y="%.1f" text-anchor="middle">%gs</text>`+"\n", xx, top+plotH, xx, top+plotH+4, xx, top+plotH+16, s)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%d</text><text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n", left-4, top+4, maxConn, left-4, top+plotH)
	// Handshake bars.
	bw := plotW / buckets
	for i := range okB {
		if okB[i]+failB[i] == 0 {
			continue
		}
		hOK := plotH * 0.35 * okB[i] / maxHS
		hFail := plotH * 0.35 * failB[i] / maxHS
		bx := left + float64(i)*bw
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#7bc67b"/>`+"\n", bx, top+plotH-hOK, math.Max(bw-1, 1), hOK)
		if hFail > 0 {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#e05555"/>`+"\n", bx, top+plotH-hOK-hFail, math.Max(bw-1, 1), hFail)
		}
	}
	// Marks.
	labelRow := 0
	for _, m := range marks {
		xx := x(m.At)
		switch m.Kind {
		case MarkPhase:
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="4 3"/>`+"\n", xx, top, xx, top+plotH)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#333">%s</text>`+"\n", xx+3, top+plotH+30+float64(labelRow%2)*13, html.EscapeString(m.Label))
			labelRow++
		case MarkReload:
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#3a6fd8" stroke-width="1.5"><title>%s</title></line>`+"\n", xx, top, xx, top+12, html.EscapeString(m.Label))
		case MarkFailure:
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e05555" stroke-width="2"><title>%s</title></line>`+"\n", xx, top, xx, top+plotH, html.EscapeString(m.Label))
		}
	}
	// Connected agents.
	if len(samples) > 0 {
		b.WriteString(`<polyline fill="none" stroke="black" stroke-width="1.5" points="`)
		for _, s := range samples {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(s.At), yConn(s.Connected))
		}
		b.WriteString("\"/>\n")
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

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
