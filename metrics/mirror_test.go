package metrics_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/mirror"
)

var _ mirror.Observer = (*metrics.Mirror)(nil)

// TestMirrorSeries: the mirror series follow the naming options; the first
// update creates every failure reason at zero, and each update counts once
// with one count per file renamed.
func TestMirrorSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.NewMirror(reg, metrics.WithPrefix("acme"), metrics.WithComponentLabel("listener"))
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveWritten("web", []string{mirror.CAFile, mirror.TruststoreFile, mirror.KeyFile, mirror.CertFile, mirror.KeystoreFile}, true)
	m.ObserveWritten("web", []string{mirror.KeyFile, mirror.CertFile, mirror.KeystoreFile}, false)
	m.ObserveFailure("web", mirror.ReasonWrite)
	want := `
# HELP acme_mirror_failures_total Mirror updates that failed, once per distinct failure, by reason (password, encode, write); the directory keeps its last good files. Alert on any increase.
# TYPE acme_mirror_failures_total counter
acme_mirror_failures_total{listener="web",reason="encode"} 0
acme_mirror_failures_total{listener="web",reason="password"} 0
acme_mirror_failures_total{listener="web",reason="write"} 1
# HELP acme_mirror_files_written_total Files of the mirror directory renamed in place, by file name.
# TYPE acme_mirror_files_written_total counter
acme_mirror_files_written_total{file="ca.crt",listener="web"} 1
acme_mirror_files_written_total{file="keystore.p12",listener="web"} 2
acme_mirror_files_written_total{file="tls.crt",listener="web"} 2
acme_mirror_files_written_total{file="tls.key",listener="web"} 2
acme_mirror_files_written_total{file="truststore.p12",listener="web"} 1
# HELP acme_mirror_updates_total Updates of the mirror directory: validated material (or a new PKCS#12 password) renamed in place.
# TYPE acme_mirror_updates_total counter
acme_mirror_updates_total{listener="web"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "acme_mirror_failures_total", "acme_mirror_files_written_total", "acme_mirror_updates_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "acme_mirror_last_update_timestamp_seconds"); n != 1 {
		t.Errorf("%d last-update series, want 1", n)
	}
	for _, r := range []string{mirror.ReasonPassword, mirror.ReasonEncode, mirror.ReasonWrite} {
		if !strings.Contains(want, `reason="`+r+`"`) {
			t.Errorf("reason %q of package mirror is not created at zero", r)
		}
	}
}
