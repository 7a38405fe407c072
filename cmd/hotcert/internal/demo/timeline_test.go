package demo

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestTimelineSVGIsWellFormedAndShowsEverything(t *testing.T) {
	tl := NewTimeline()
	tl.Sample(0, 0, 0)
	tl.Mark(MarkPhase, "renew <server> certificate")
	tl.Sample(10, 10, 0)
	tl.Mark(MarkReload, "replica-0 reloaded")
	tl.Sample(10, 25, 3)
	tl.Mark(MarkFailure, "replica-1 refused")
	var b strings.Builder
	if err := tl.WriteSVG(&b, "hotcert demo"); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
	for _, want := range []string{"renew &lt;server&gt; certificate", "replica-0 reloaded", "replica-1 refused", `fill="#e05555"`, "<polyline"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if len(tl.Marks()) != 3 {
		t.Errorf("marks: %d", len(tl.Marks()))
	}
}
