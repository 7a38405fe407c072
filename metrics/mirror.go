package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Mirror counts the updates of a mirror.Mirror: it is a mirror.Observer (pass it
// with mirror.WithObserver). Create it with [NewMirror]. The material a mirror
// writes is reported by its Reloader's [Recorder] (the *_info series and reload
// outcomes); these series say what reached the directory.
type Mirror struct {
	updates  *prometheus.CounterVec
	files    *prometheus.CounterVec
	failures *prometheus.CounterVec
	last     *prometheus.GaugeVec
	now      func() time.Time
}

// mirrorReasons are the reasons of a mirror failure (the mirror package's Reason
// constants), created at zero with the first update so that increase() sees a
// baseline.
var mirrorReasons = []string{"password", "encode", "write"}

// NewMirror registers with reg (nil skips registration), named by the same
// options a process passes to [New]:
//
//	hotcert_mirror_updates_total{component}                   updates renamed into the directory (the first included)
//	hotcert_mirror_files_written_total{component,file}        files renamed in place, by file name
//	hotcert_mirror_failures_total{component,reason}           distinct failures (reason password|encode|write)
//	hotcert_mirror_last_update_timestamp_seconds{component}   when the directory was last updated, Unix seconds
func NewMirror(reg prometheus.Registerer, opts ...Option) (*Mirror, error) {
	n, err := NewNaming(opts...)
	if err != nil {
		return nil, err
	}
	m := &Mirror{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("mirror_updates_total"),
			Help: "Updates of the mirror directory: validated material (or a new PKCS#12 password) renamed in place."}, []string{n.label}),
		files: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("mirror_files_written_total"),
			Help: "Files of the mirror directory renamed in place, by file name."}, []string{n.label, "file"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: n.Name("mirror_failures_total"),
			Help: "Mirror updates that failed, once per distinct failure, by reason (password, encode, write); the directory keeps its last good files. Alert on any increase."}, []string{n.label, "reason"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: n.Name("mirror_last_update_timestamp_seconds"),
			Help: "When the mirror directory was last updated, Unix seconds."}, []string{n.label}),
		now: time.Now,
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.updates, m.files, m.failures, m.last} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("metrics: register mirror metrics: %w", err)
			}
		}
	}
	return m, nil
}

// ObserveWritten implements mirror.Observer.
func (m *Mirror) ObserveWritten(component string, files []string, initial bool) {
	if initial {
		for _, r := range mirrorReasons {
			m.failures.WithLabelValues(component, r).Add(0)
		}
	}
	m.updates.WithLabelValues(component).Inc()
	for _, f := range files {
		m.files.WithLabelValues(component, f).Inc()
	}
	m.last.WithLabelValues(component).Set(float64(m.now().Unix()))
}

// ObserveFailure implements mirror.Observer.
func (m *Mirror) ObserveFailure(component, reason string) {
	m.failures.WithLabelValues(component, reason).Inc()
}
