package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// palette colours the series in order (a colour-blind-safe set, Okabe–Ito).
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xFF}, {0xD5, 0x5E, 0x00, 0xFF}, {0x00, 0x9E, 0x73, 0xFF}, {0xCC, 0x79, 0xA7, 0xFF},
	{0x56, 0xB4, 0xE9, 0xFF}, {0xE6, 0x9F, 0x00, 0xFF}, {0x00, 0x00, 0x00, 0xFF}, {0xF0, 0xE4, 0x42, 0xFF},
}

// render draws p from t as an SVG on w: one line with point markers per series,
// x ticks at the measured x values.
func render(w io.Writer, p Plot, t *Table) error {
	if len(p.Series) > len(palette) {
		return fmt.Errorf("%s: %d series, at most %d", p.Out, len(p.Series), len(palette))
	}
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text, pl.Y.Label.Text = p.XLabel, p.YLabel
	pl.Legend.Top, pl.Legend.Left = true, true
	pl.Add(plotter.NewGrid())
	var xs []float64
	for i, s := range p.Series {
		j, err := t.column(s.Column)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Out, err)
		}
		sx, sy := t.points(j)
		if len(sx) == 0 {
			return fmt.Errorf("%s: column %q has no values", p.Out, s.Column)
		}
		xy := make(plotter.XYs, len(sx))
		for k := range sx {
			xy[k].X, xy[k].Y = sx[k], sy[k]
		}
		line, marks, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", p.Out, s.Column, err)
		}
		line.Color, marks.Color = palette[i], palette[i]
		line.Width = vg.Points(1.5)
		marks.Shape = draw.CircleGlyph{}
		pl.Add(line, marks)
		label := s.Label
		if label == "" {
			label = s.Column
		}
		pl.Legend.Add(label, line, marks)
		xs = append(xs, sx...)
	}
	for _, h := range p.HLines {
		ref, err := plotter.NewLine(plotter.XYs{{X: xs[0], Y: h.Y}, {X: xs[len(xs)-1], Y: h.Y}})
		if err != nil {
			return fmt.Errorf("%s: %w", p.Out, err)
		}
		ref.Color, ref.Dashes = color.Gray{Y: 0x60}, []vg.Length{vg.Points(4), vg.Points(3)}
		pl.Add(ref)
		pl.Legend.Add(h.Label, ref)
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	lo, hi := xs[0], xs[len(xs)-1]
	if p.LogX {
		if lo <= 0 {
			return fmt.Errorf("%s: log x axis with x = %g", p.Out, lo)
		}
		pl.X.Scale = plot.LogScale{}
		// A little room on both sides, so the end ticks' labels fit.
		pl.X.Min, pl.X.Max = lo/math.Pow(hi/lo, 0.04), hi*math.Pow(hi/lo, 0.04)
	} else {
		pl.X.Min, pl.X.Max = lo-(hi-lo)*0.04, hi+(hi-lo)*0.04
	}
	ticks := make([]plot.Tick, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: formatX(x)}
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	if p.YZero {
		pl.Y.Min = math.Min(0, pl.Y.Min)
	}
	// Room above the data for the legend (top left), about 15 points per entry of a
	// plot about 250 points high.
	entries := float64(len(p.Series) + len(p.HLines))
	if frac := math.Min(0.6, entries*15/250); pl.Y.Max > pl.Y.Min {
		pl.Y.Max = pl.Y.Min + (pl.Y.Max-pl.Y.Min)/(1-frac)
	}
	pl.Legend.Padding = vg.Points(1)
	pl.Legend.XOffs, pl.Legend.YOffs = vg.Points(6), vg.Points(-4)
	pl.X.Padding, pl.Y.Padding = vg.Points(4), vg.Points(4)
	wt, err := pl.WriterTo(7*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return fmt.Errorf("%s: %w", p.Out, err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("%s: %w", p.Out, err)
	}
	return nil
}

// formatX labels an x tick: 1000 → "1k", 2500 → "2.5k", 50000 → "50k".
func formatX(x float64) string {
	if x >= 1000 && math.Mod(x, 100) == 0 {
		return strconv.FormatFloat(x/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}
