package main

import (
	"bytes"
	"fmt"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// chartFile is the name Helm gives the packaged chart.
func chartFile(version string) string { return "hotcert-controller-" + version + ".tgz" }

// writeChart packages the chart into c.Out, its version and appVersion
// c.Version (so that it runs the release's image, tagged appVersion) and its
// image repository c.Repository.
func writeChart(c Config) error {
	ch, err := loader.Load(abs(c.Dir, chartDir))
	if err != nil {
		return fmt.Errorf("loading the chart: %w", err)
	}
	ch.Metadata.Version, ch.Metadata.AppVersion = c.Version, c.Version
	image, _ := ch.Values["image"].(map[string]any)
	old, _ := image["repository"].(string)
	if old == "" {
		return fmt.Errorf("the chart's values have no image.repository")
	}
	if old != c.Repository {
		// values.yaml is saved as it is written (comments and all): the
		// one line changes.
		for _, f := range ch.Raw {
			if f.Name != chartutil.ValuesfileName {
				continue
			}
			line := []byte("repository: " + old + "\n")
			if n := bytes.Count(f.Data, line); n != 1 {
				return fmt.Errorf("values.yaml has %d lines %q, want 1", n, line)
			}
			f.Data = bytes.Replace(f.Data, line, []byte("repository: "+c.Repository+"\n"), 1)
		}
		image["repository"] = c.Repository
	}
	if _, err := chartutil.Save(ch, c.Out); err != nil {
		return fmt.Errorf("packaging the chart: %w", err)
	}
	return nil
}
