package demo

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"testing"
)

// svgElement is one element of a drawn timeline, with the attributes tests read.
type svgElement struct {
	Name             string
	Class, Phase     string
	Label, Fill      string
	Title, InnerText string
}

// parseSVG reads every element of an SVG document (failing on malformed XML),
// with the text of <title> and <text> children attached to their parents.
func parseSVG(t *testing.T, svg string) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	var (
		out   []svgElement
		stack []int
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the timeline is not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			e := svgElement{Name: tk.Name.Local}
			for _, a := range tk.Attr {
				switch a.Name.Local {
				case "class":
					e.Class = a.Value
				case "data-phase":
					e.Phase = a.Value
				case "data-label":
					e.Label = a.Value
				case "fill":
					e.Fill = a.Value
				}
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.CharData:
			if len(stack) < 2 {
				continue
			}
			cur, parent := out[stack[len(stack)-1]], stack[len(stack)-2]
			switch cur.Name {
			case "title":
				out[parent].Title += string(tk)
			case "text":
				out[stack[len(stack)-1]].InnerText += string(tk)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	return out
}

func withClass(els []svgElement, class string) []svgElement {
	var out []svgElement
	for _, e := range els {
		if e.Class == class {
			out = append(out, e)
		}
	}
	return out
}

func texts(els []svgElement) string {
	var b strings.Builder
	for _, e := range els {
		b.WriteString(e.InnerText + "\n")
	}
	return b.String()
}

// The picture is the rotation: a band per served certificate, per trusted CA set
// and per issuer the replicas serve, stacked to the fleet's and the replicas' size, marks tagged with their phase, and a legend
// naming every band and every kind of mark.
func TestTimelineDrawsBandsMarksAndLegend(t *testing.T) {
	tl := NewTimeline()
	tl.Sample(Sample{Served: map[string]int{"cert 1 (CA 2025)": 10}, Trusted: map[string]int{"trusts CA 2025": 10}, Issuers: map[string]int{"issued by CA 2025": 2}})
	tl.Mark(MarkPhase, "CA step 1: <union> bundle")
	tl.Mark(MarkForced, "forced reconnect")
	tl.Mark(MarkBundleReload, "agent-0 trusts CA 2025 + CA 2026")
	tl.Sample(Sample{Served: map[string]int{"cert 1 (CA 2025)": 6}, Disconnected: 4, Trusted: map[string]int{"trusts CA 2025": 4, "trusts CA 2025 + CA 2026": 6}, HandshakesOK: 6})
	tl.Mark(MarkPhase, "CA step 2: new-CA certificate")
	tl.Mark(MarkDrain, "graceful reconnect")
	tl.Mark(MarkReload, "replica-0 serves serial 0A")
	tl.Mark(MarkFailure, "replica-1 refused")
	tl.Mark(MarkKeys, "JWT step 1")
	tl.Sample(Sample{Served: map[string]int{"cert 2 (CA 2026)": 10}, Trusted: map[string]int{"trusts CA 2025 + CA 2026": 10}, Issuers: map[string]int{"issued by CA 2025": 1, "issued by CA 2026": 1},
		HandshakesOK: 16, HandshakesFailed: 1})
	var b strings.Builder
	if err := tl.WriteSVG(&b, "hotcert demo"); err != nil {
		t.Fatal(err)
	}
	els := parseSVG(t, b.String())

	bands := map[string]string{}
	for _, e := range els {
		if strings.HasPrefix(e.Class, "band ") {
			bands[e.Class+": "+e.Label] = e.Fill
		}
	}
	for _, want := range []string{"band served: cert 1 (CA 2025)", "band served: cert 2 (CA 2026)", "band served: not connected",
		"band trusted: trusts CA 2025", "band trusted: trusts CA 2025 + CA 2026",
		"band issuer: issued by CA 2025", "band issuer: issued by CA 2026"} {
		if bands[want] == "" {
			t.Errorf("no %s (bands: %v)", want, bands)
		}
	}
	if bands["band served: cert 1 (CA 2025)"] == bands["band served: cert 2 (CA 2026)"] {
		t.Error("two certificates share a colour")
	}
	for kind, phase := range map[MarkKind]string{
		MarkForced: "CA step 1: <union> bundle", MarkBundleReload: "CA step 1: <union> bundle",
		MarkDrain: "CA step 2: new-CA certificate", MarkReload: "CA step 2: new-CA certificate",
		MarkFailure: "CA step 2: new-CA certificate", MarkKeys: "CA step 2: new-CA certificate",
	} {
		ms := withClass(els, "mark "+string(kind))
		if len(ms) != 1 || ms[0].Phase != phase || ms[0].Title == "" {
			t.Errorf("mark %s: %+v, want one in phase %q with a title", kind, ms, phase)
		}
	}
	if ms := withClass(els, "mark phase"); len(ms) != 2 || !strings.Contains(texts(els), "CA step 1: <union> bundle") {
		t.Errorf("phase marks: %+v", ms)
	}
	legend := texts(els)
	for _, want := range []string{"cert 1 (CA 2025)", "cert 2 (CA 2026)", "not connected", "trusts CA 2025 + CA 2026", "issued by CA 2026",
		"a replica serves a new certificate", "an agent loaded a new CA bundle", "refused (last good kept)",
		"graceful reconnect (drain window)", "forced reconnect (all dropped)", "signing-key rotation step", "a phase starts"} {
		if !strings.Contains(legend, want) {
			t.Errorf("the legend lacks %q", want)
		}
	}
	if len(withClass(els, "bar ok")) == 0 || len(withClass(els, "bar failed")) != 1 {
		t.Errorf("handshake bars: %d ok, %d failed", len(withClass(els, "bar ok")), len(withClass(els, "bar failed")))
	}
}

// A refused certificate that was never served has no band: the legend says so and
// why, instead of silently skipping its number; one it did serve is not called
// never served.
func TestTimelineLegendSaysWhyARefusedCertificateHasNoBand(t *testing.T) {
	tl := NewTimeline()
	tl.Sample(Sample{Served: map[string]int{"cert 3 (CA 2026)": 10}})
	tl.Refused("cert 4 (CA 2026)", "refused by replica-0 (its key does not match)")
	tl.Sample(Sample{Served: map[string]int{"cert 5 (CA 2026)": 10}})
	tl.Refused("cert 5 (CA 2026)", "refused by replica-1")
	var b strings.Builder
	if err := tl.WriteSVG(&b, "hotcert demo"); err != nil {
		t.Fatal(err)
	}
	note := texts(withClass(parseSVG(t, b.String()), "legend-refused"))
	if !strings.Contains(note, "cert 4 (CA 2026): never served") || !strings.Contains(note, "refused by replica-0 (its key does not match)") || strings.Contains(note, "cert 5") {
		t.Errorf("legend notes on refused certificates:\n%s", note)
	}
}

// A colour names one band across the picture: no two panels share one.
func TestTimelinePanelsShareNoColour(t *testing.T) {
	tl := NewTimeline()
	s := Sample{Served: map[string]int{}, Trusted: map[string]int{}, Issuers: map[string]int{}, Disconnected: 1}
	for i := range 6 {
		s.Served[fmt.Sprintf("cert %d", i)] = 1
	}
	for i := range 5 {
		s.Trusted[fmt.Sprintf("trusts %d", i)] = 1
		s.Issuers[fmt.Sprintf("issued by %d", i)] = 1
	}
	tl.Sample(s)
	tl.Sample(s)
	var b strings.Builder
	if err := tl.WriteSVG(&b, "hotcert demo"); err != nil {
		t.Fatal(err)
	}
	panelOf := map[string]string{} // fill → the panel whose band uses it
	for _, e := range parseSVG(t, b.String()) {
		panel, ok := strings.CutPrefix(e.Class, "band ")
		if !ok {
			continue
		}
		if other, seen := panelOf[e.Fill]; seen && other != panel {
			t.Errorf("%s (%s) has the colour %s of a %s band", e.Label, panel, e.Fill, other)
		}
		panelOf[e.Fill] = panel
	}
	if len(panelOf) != 6+1+5+5 {
		t.Errorf("%d colours for 6 certificates, not connected, 5 CA sets and 5 issuers", len(panelOf))
	}
}
