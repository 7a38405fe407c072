package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/metrics"
)

// frozenSource is a source that says some of its files never change (as
// source/file does for subPath mounts).
type frozenSource struct {
	staticSource
	files []string
}

func (s frozenSource) NeverUpdated() []string { return s.files }

// TestFilesNeverUpdated: the Reloader tells the Recorder, at its first load,
// how many files of its source never change, through a composed source too;
// a source that cannot tell gets no series.
func TestFilesNeverUpdated(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	l := ca.MustIssue()
	id := staticSource{hotcert.Content{Cert: hotcert.Input{Name: "c", Data: l.ChainPEM}, Key: hotcert.Input{Name: "k", Data: l.KeyPEM}}}
	trust := staticSource{hotcert.Content{CA: hotcert.Input{Name: "ca", Data: ca.CertPEM}}}
	reg := prometheus.NewPedanticRegistry()
	rec, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for component, src := range map[string]hotcert.Source{
		"subpath": hotcert.Compose(frozenSource{id, []string{"/tls/tls.crt", "/tls/tls.key"}}, frozenSource{trust, []string{"/ca/ca.crt"}}),
		"volume":  frozenSource{id, nil},
		"unknown": id,
	} {
		if _, err := hotcert.New(context.Background(), src, hotcert.WithObserver(rec), hotcert.WithComponent(component)); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP hotcert_tls_files_never_updated Files of the source that will never be updated where they are read (a Kubernetes subPath mount): a rotation reaches the process only when it restarts.
# TYPE hotcert_tls_files_never_updated gauge
hotcert_tls_files_never_updated{component="subpath"} 3
hotcert_tls_files_never_updated{component="volume"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hotcert_tls_files_never_updated"); err != nil {
		t.Fatal(err)
	}
}
