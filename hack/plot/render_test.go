package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const testTSV = "agents\ta_kib\tb_kib\n1000\t1.5\t2\n2000\t1.6\t\n5000\t1.7\t2.5\n10000\t1.8\t3\n"

func testPlot(logx bool) Plot {
	return Plot{Out: "t.svg", Title: "Heap per connection", XLabel: "agents", YLabel: "heap per connection (KiB)", LogX: logx, YZero: true,
		Series: []Series{{Column: "a_kib", Label: "plain"}, {Column: "b_kib", Label: "control plane"}}}
}

// svgPath is a <path> of the SVG, with its vertices when it is an open polyline.
type svgPath struct {
	D     string `xml:"d,attr"`
	Style string `xml:"style,attr"`
}

// parseSVG returns the SVG's paths and texts, parsed with encoding/xml.
func parseSVG(t *testing.T, data []byte) (paths []svgPath, texts []string) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				return paths, texts
			}
			t.Fatalf("the SVG does not parse: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "path":
			var p svgPath
			if err := dec.DecodeElement(&p, &se); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		case "text":
			var s string
			if err := dec.DecodeElement(&s, &se); err != nil {
				t.Fatal(err)
			}
			texts = append(texts, strings.TrimSpace(s))
		}
	}
}

var vertex = regexp.MustCompile(`[ML]([-0-9.e]+),([-0-9.e]+)`)

// polyline returns the vertices of p when it is an open polyline (moves and lines
// only) stroked in colour c.
func (p svgPath) polyline(c string) ([][2]float64, bool) {
	if !strings.Contains(p.Style, "stroke:"+c) || strings.ContainsAny(p.D, "AZCQ") {
		return nil, false
	}
	var vs [][2]float64
	for _, m := range vertex.FindAllStringSubmatch(p.D, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		vs = append(vs, [2]float64{x, y})
	}
	return vs, true
}

func hexColor(i int) string {
	c := palette[i]
	return fmt.Sprintf("#%02X%02X%02X", c.R, c.G, c.B)
}

func TestRenderDrawsOnePolylinePerSeries(t *testing.T) {
	tab, err := readTable(strings.NewReader(testTSV))
	if err != nil {
		t.Fatal(err)
	}
	for _, logx := range []bool{false, true} {
		t.Run(fmt.Sprintf("logx=%v", logx), func(t *testing.T) {
			var out bytes.Buffer
			if err := render(&out, testPlot(logx), tab); err != nil {
				t.Fatal(err)
			}
			paths, texts := parseSVG(t, out.Bytes())
			// b_kib has no value at 2000: three points.
			for i, want := range []int{4, 3} {
				var lines [][][2]float64
				for _, p := range paths {
					// The legend's sample line has two vertices; a series line has one
					// per point.
					if vs, ok := p.polyline(hexColor(i)); ok && len(vs) > 2 {
						lines = append(lines, vs)
					}
				}
				if len(lines) != 1 || len(lines[0]) != want {
					t.Fatalf("series %d: %d polylines in its colour (%v), want one of %d points", i, len(lines), lines, want)
				}
				if i == 0 {
					// x positions of 1000, 2000, 5000, 10000 along the axis.
					vs := lines[0]
					frac := (vs[2][0] - vs[0][0]) / (vs[3][0] - vs[0][0]) // where 5000 lies between 1000 and 10000
					wantFrac := 4000.0 / 9000
					if logx {
						wantFrac = math.Log(5) / math.Log(10)
					}
					if math.Abs(frac-wantFrac) > 0.01 {
						t.Errorf("5000 lies at %.3f of the way from 1000 to 10000, want %.3f (log x %v)", frac, wantFrac, logx)
					}
				}
			}
			for _, want := range []string{"Heap per connection", "agents", "heap per connection (KiB)", "plain", "control plane", "1k", "2k", "5k", "10k"} {
				if !containsString(texts, want) {
					t.Errorf("no text %q in the SVG (texts: %q)", want, texts)
				}
			}
		})
	}
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func TestRenderRejectsUnknownColumn(t *testing.T) {
	tab, err := readTable(strings.NewReader(testTSV))
	if err != nil {
		t.Fatal(err)
	}
	p := testPlot(false)
	p.Series[1].Column = "rss_kib"
	if err := render(&bytes.Buffer{}, p, tab); err == nil || !strings.Contains(err.Error(), `no column "rss_kib"`) {
		t.Fatalf("err = %v, want one naming the missing column", err)
	}
}

func TestReadTableRejectsBadCells(t *testing.T) {
	for name, in := range map[string]string{
		"not a number": "agents\ta\n1000\tlots\n",
		"no x":         "agents\ta\n\t1\n",
		"short row":    "agents\ta\n1000\n",
	} {
		if _, err := readTable(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRunRendersEveryDataFileAndSkipsMissingOnes(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "img")
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(data, "agents.tsv"), testTSV)
	cfg := `{"agents.tsv": [{"out": "a.svg", "series": [{"column": "a_kib"}]}, {"out": "b.svg", "logx": true, "series": [{"column": "b_kib"}]}],
	         "controller.tsv": [{"out": "c.svg", "series": [{"column": "p99_ms"}]}]}`
	write(filepath.Join(dir, "plots.json"), cfg)
	var log bytes.Buffer
	if err := run(filepath.Join(dir, "plots.json"), data, out, &log); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.svg", "b.svg"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "c.svg")); err == nil {
		t.Error("c.svg was drawn without its data file")
	}
	if !strings.Contains(log.String(), "controller.tsv: no data yet, skipped") {
		t.Errorf("log does not say the controller data is missing:\n%s", log.String())
	}

	write(filepath.Join(data, "orphan.tsv"), testTSV)
	if err := run(filepath.Join(dir, "plots.json"), data, out, &log); err == nil || !strings.Contains(err.Error(), "orphan.tsv has no plots") {
		t.Fatalf("a data file without a config: err = %v", err)
	}
}
