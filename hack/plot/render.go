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
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if p.LogX {
		if xs[0] <= 0 {
			return fmt.Errorf("%s: log x axis with x = %g", p.Out, xs[0])
		}
		pl.X.Scale = plot.LogScale{}
	}
	ticks := make([]plot.Tick, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: formatX(x)}
	}
	pl.X.Tick.Marker = plot.ConstantTicks(ticks)
	if p.YZero {
		pl.Y.Min = math.Min(0, pl.Y.Min)
	}
	// Room on each side, so markers at the extremes are not clipped.
	pl.X.Padding, pl.Y.Padding = vg.Points(8), vg.Points(8)
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
