package evidence

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hotcert/hotcert/rollout/internal/census"
)

// Scrape reads what the hotcert processes behind one metrics endpoint report
// (the <prefix>_tls_cert_info and <prefix>_tls_ca_certificate_info series of
// the text exposition format), as the report of container (the container
// whose port it is; "" when not known). ok is false when the endpoint
// exposes neither series: its process does not run hotcert, or holds
// nothing yet.
func Scrape(ctx context.Context, hc *http.Client, url, prefix, container string) (r census.Report, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return census.Report{}, false, fmt.Errorf("evidence: scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return census.Report{}, false, fmt.Errorf("evidence: scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return census.Report{}, false, fmt.Errorf("evidence: scrape %s: HTTP %d", url, resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return census.Report{}, false, fmt.Errorf("evidence: scrape %s: %w", url, err)
	}
	b := newBuilder(or(prefix, "hotcert"))
	for _, name := range []string{b.leafName, b.caName} {
		f := families[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetGauge().GetValue() != 1 {
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			b.add("", container, name, labels)
		}
	}
	rs := b.reports[""]
	if len(rs) == 0 {
		return census.Report{Container: container}, false, nil
	}
	return rs[0], true, nil
}
