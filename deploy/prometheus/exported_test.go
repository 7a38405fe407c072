package prometheus

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/rollout/controller"
)

// targetLabels are the labels Prometheus (and the Prometheus Operator) add to
// every scraped series.
var targetLabels = []string{"instance", "job", "namespace", "pod", "service", "container", "endpoint"}

// describer is a prometheus.Registerer that records what each collector
// describes: the names and variable labels of the series it exports.
type describer struct{ series map[string][]string }

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := descRE.FindStringSubmatch(desc.String())
		if m == nil {
			panic("unexpected prometheus.Desc format: " + desc.String())
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		d.series[m[1]] = labels
	}
	return nil
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describer) Unregister(prometheus.Collector) bool { return false }

// exportedSeries returns the series hotcert's code registers with the default
// names: the TLS reload recorder, the mirror's and the deny list's (package metrics) and the rollout controller,
// each registered as the binaries register them. Series names map to their
// labels.
func exportedSeries(t testing.TB) map[string][]string {
	t.Helper()
	d := &describer{series: map[string][]string{}}
	if _, err := metrics.New(d); err != nil {
		t.Fatal(err)
	}
	if _, err := controller.New(controller.Options{Registerer: d}); err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.NewMirror(d); err != nil { // hotcert mirror's
		t.Fatal(err)
	}
	if _, err := metrics.NewDenyList(d); err != nil { // a deny list's (tlsconfig.WithDenyList)
		t.Fatal(err)
	}
	if len(d.series) == 0 {
		t.Fatal("no series registered")
	}
	return d.series
}
