package controlplane_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The scale benchmarks write their figures as TSV rows (header row, the agent count
// in the first column) when HOTCERT_SCALE_TSV names a directory, so the docs' data
// (docs/data/*.tsv) and plots come from the runs themselves, never retyped. Each
// size updates its own row and leaves the others; a cell this run did not measure
// (a server it skipped) keeps its previous value.
const scaleEnvTSV = "HOTCERT_SCALE_TSV"

// writeScaleTSV updates the row of n in dir/name (from HOTCERT_SCALE_TSV; nothing
// to do without it) with cells, a column name → value map whose columns must be in
// header.
func writeScaleTSV(b *testing.B, name string, header []string, n int, cells map[string]string) {
	b.Helper()
	dir := os.Getenv(scaleEnvTSV)
	if dir == "" {
		return
	}
	path := filepath.Join(dir, name)
	if err := upsertTSV(path, header, strconv.Itoa(n), cells); err != nil {
		b.Fatalf("%s: %v", scaleEnvTSV, err)
	}
	b.Logf("updated the %d-agent row of %s", n, path)
}

// upsertTSV sets the cells of the row whose first column is key (adding the row),
// keeps the rows sorted by their numeric key and rewrites the file with header.
// An existing file with another header is an error: nothing is overwritten.
func upsertTSV(path string, header []string, key string, cells map[string]string) error {
	for col := range cells {
		if !slices.Contains(header, col) {
			return fmt.Errorf("%s: column %q is not in the header", path, col)
		}
	}
	rows := map[string][]string{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		r := csv.NewReader(bytes.NewReader(data))
		r.Comma = '\t'
		recs, err := r.ReadAll()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(recs) == 0 || !slices.Equal(recs[0], header) {
			return fmt.Errorf("%s: its header is not %q: move it away to start a new one", path, strings.Join(header, "\t"))
		}
		for _, rec := range recs[1:] {
			rows[rec[0]] = rec
		}
	}
	row := rows[key]
	if row == nil {
		row = make([]string, len(header))
		row[0] = key
	}
	for i, col := range header {
		if v, ok := cells[col]; ok && i > 0 {
			row[i] = v
		}
	}
	rows[key] = row
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		x, _ := strconv.ParseFloat(a, 64)
		y, _ := strconv.ParseFloat(b, 64)
		if x < y {
			return -1
		} else if x > y {
			return 1
		}
		return strings.Compare(a, b)
	})
	var out bytes.Buffer
	w := csv.NewWriter(&out)
	w.Comma = '\t'
	_ = w.Write(header)
	for _, k := range keys {
		_ = w.Write(rows[k])
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

func fmtFloat(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// agentsTSVHeader is docs/data/agents-scale.tsv's: per server, heap, RSS and CPU per
// connection and goroutines per connection; ratios against plain (_x) and plaintok
// (_xtok) from the same run.
var agentsTSVHeader = func() []string {
	h := []string{"agents"}
	for _, k := range []string{scalePlain, scalePlainTokens, scaleControlPlane, scaleDrain} {
		h = append(h, k+"_heap_kib", k+"_rss_kib", k+"_cpu_ms", k+"_goroutines")
	}
	for _, k := range []string{scalePlainTokens, scaleControlPlane, scaleDrain} {
		h = append(h, k+"_heap_x", k+"_rss_x", k+"_cpu_x")
	}
	for _, k := range []string{scaleControlPlane, scaleDrain} {
		h = append(h, k+"_heap_xtok", k+"_rss_xtok", k+"_cpu_xtok")
	}
	return h
}()

func writeAgentsTSV(b *testing.B, n int, res []scaleResult) {
	cells := map[string]string{}
	byKind := map[string]scaleResult{}
	for _, r := range res {
		byKind[r.Kind] = r
		cells[r.Kind+"_heap_kib"] = fmtFloat(r.HeapPerConn()/1024, 1)
		cells[r.Kind+"_rss_kib"] = fmtFloat(r.RSSPerConn()/1024, 1)
		cells[r.Kind+"_cpu_ms"] = fmtFloat(r.CPUPerConn().Seconds()*1e3, 3)
		cells[r.Kind+"_goroutines"] = fmtFloat(r.GoroutinesPerConn(), 2)
	}
	for base, suffix := range map[string]string{scalePlain: "_x", scalePlainTokens: "_xtok"} {
		br, ok := byKind[base]
		if !ok {
			continue
		}
		for _, r := range res {
			if r.Kind == base || (base == scalePlainTokens && r.Kind == scalePlain) {
				continue
			}
			heap, rss, cpu := r.ratios(br)
			cells[r.Kind+"_heap"+suffix], cells[r.Kind+"_rss"+suffix], cells[r.Kind+"_cpu"+suffix] = fmtFloat(heap, 2), fmtFloat(rss, 2), fmtFloat(cpu, 2)
		}
	}
	writeScaleTSV(b, "agents-scale.tsv", agentsTSVHeader, n, cells)
}
