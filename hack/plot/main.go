package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	configPath := flag.String("config", "docs/data/plots.json", "the plots to draw from each data file (JSON)")
	dataDir := flag.String("data", "docs/data", "the directory of the TSV data files")
	outDir := flag.String("out", "docs/img", "the directory the SVG plots are written to")
	flag.Parse()
	if err := run(*configPath, *dataDir, *outDir, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run renders every data file of dataDir with its plots from the config into outDir.
func run(configPath, dataDir, outDir string, log io.Writer) error {
	cfg, err := loadConfig(configPath)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dataDir, "*.tsv"))
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	for _, f := range files {
		if _, ok := cfg[filepath.Base(f)]; !ok {
			return fmt.Errorf("plot: %s has no plots in %s: add them there", f, configPath)
		}
	}
	names := make([]string, 0, len(cfg))
	for name := range cfg {
		names = append(names, name)
	}
	slices.Sort(names)
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	for _, name := range names {
		path := filepath.Join(dataDir, name)
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			fmt.Fprintf(log, "plot: %s: no data yet, skipped\n", path)
			continue
		}
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		t, err := readTable(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("plot: %s: %w", path, err)
		}
		for _, p := range cfg[name] {
			var svg bytes.Buffer
			if err := render(&svg, p, t); err != nil {
				return fmt.Errorf("plot: %s: %w", path, err)
			}
			out := filepath.Join(outDir, p.Out)
			if err := os.WriteFile(out, svg.Bytes(), 0o644); err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			fmt.Fprintf(log, "plot: %s -> %s (%s)\n", path, out, strings.Join(columns(p), ", "))
		}
	}
	return nil
}

func columns(p Plot) []string {
	var c []string
	for _, s := range p.Series {
		c = append(c, s.Column)
	}
	return c
}
