package main

import (
	"encoding/json"
	"fmt"
	"os"
)

// Config maps a data file's name (e.g. "agents-scale.tsv") to the plots drawn from
// it.
type Config map[string][]Plot

// Plot is one SVG line plot.
type Plot struct {
	Out    string   `json:"out"`    // output file name, e.g. "agents-rss.svg"
	Title  string   `json:"title"`  // plot title
	XLabel string   `json:"xlabel"` // x axis label, with its unit
	YLabel string   `json:"ylabel"` // y axis label, with its unit
	LogX   bool     `json:"logx"`   // logarithmic x axis
	YZero  bool     `json:"yzero"`  // start the y axis at 0
	Series []Series `json:"series"` // one line each
	HLines []HLine  `json:"hlines"` // dashed reference lines, such as a goal
}

// HLine is a horizontal reference line across the plot.
type HLine struct {
	Y     float64 `json:"y"`
	Label string  `json:"label"`
}

// Series is one line: a column of the data file and its legend label.
type Series struct {
	Column string `json:"column"`
	Label  string `json:"label"`
}

// loadConfig reads and checks a config file.
func loadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plot: config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("plot: config %s: %w", path, err)
	}
	outs := map[string]string{}
	for file, plots := range c {
		for i, p := range plots {
			switch {
			case p.Out == "":
				return nil, fmt.Errorf("plot: config %s: %s plot %d: no output file", path, file, i+1)
			case len(p.Series) == 0:
				return nil, fmt.Errorf("plot: config %s: %s: %s: no series", path, file, p.Out)
			case outs[p.Out] != "":
				return nil, fmt.Errorf("plot: config %s: %s is drawn from both %s and %s", path, p.Out, outs[p.Out], file)
			}
			outs[p.Out] = file
		}
	}
	return c, nil
}
