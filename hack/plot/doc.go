// Command plot renders the scale benchmarks' data (docs/data/*.tsv) as SVG line
// plots (docs/img/*.svg), as `make plots` runs it:
//
//	go run ./hack/plot -config docs/data/plots.json -data docs/data -out docs/img
//
// A data file is a TSV table: a header row, then one row per measurement, the x
// value in the first column; an empty cell is a point not measured. The config
// says, for each data file, which plots to draw from it: output file, title, axis
// labels with units, which columns (one line each, with its legend label), and
// whether the x axis is logarithmic. Every data file needs a config (a file
// without one is an error, so no data goes unplotted); a config whose data file is
// not there yet is skipped with a note.
//
// The plots are drawn with gonum.org/v1/plot, a well-kept Go plotting library
// that builds here from the module proxy and writes plain SVG (text, and a path
// per line and marker, no embedded fonts), so no SVG writer is hand-written. It
// lives in a module of its own so that neither the TLS library nor the CLI
// inherits it.
package main
