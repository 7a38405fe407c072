package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Table is a TSV data file: its header, and its rows as numbers (NaN for an empty
// cell).
type Table struct {
	Header []string
	Rows   [][]float64
}

// readTable parses a TSV table: a header row, then rows of numbers, the x value in
// the first column. Every row has the header's width; a cell is a number or empty.
func readTable(r io.Reader) (*Table, error) {
	cr := csv.NewReader(r)
	cr.Comma = '\t'
	cr.Comment = '#'
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("no header row")
	}
	t := &Table{Header: recs[0]}
	for i, rec := range recs[1:] {
		row := make([]float64, len(rec))
		for j, cell := range rec {
			cell = strings.TrimSpace(cell)
			if cell == "" {
				if j == 0 {
					return nil, fmt.Errorf("row %d: no x value", i+2)
				}
				row[j] = math.NaN()
				continue
			}
			if row[j], err = strconv.ParseFloat(cell, 64); err != nil {
				return nil, fmt.Errorf("row %d, column %q: %q is not a number", i+2, t.Header[j], cell)
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

// column returns the index of the named column.
func (t *Table) column(name string) (int, error) {
	for i, h := range t.Header {
		if h == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no column %q (columns: %s)", name, strings.Join(t.Header, ", "))
}

// points returns the (x, y) points of column j, skipping empty cells.
func (t *Table) points(j int) (xs, ys []float64) {
	for _, row := range t.Rows {
		if !math.IsNaN(row[j]) {
			xs, ys = append(xs, row[0]), append(ys, row[j])
		}
	}
	return xs, ys
}
