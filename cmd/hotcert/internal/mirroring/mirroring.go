// Package mirroring is the process of `hotcert mirror`: a Reloader of the
// material files, a mirror.Mirror of it into a plain directory, their metrics
// and the status /healthz serves.
package mirroring

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/mirror"
	"github.com/hotcert/hotcert/source/file"
)

// Config says what to mirror where.
type Config struct {
	// CertFile and KeyFile, or CredentialBundle, give the identity; CAFile the CA
	// bundle. At least one of them is needed.
	CertFile, KeyFile, CredentialBundle, CAFile string
	// Dir is the directory written to.
	Dir string
	// PasswordFile holds the PKCS#12 password; empty: PEM files only.
	PasswordFile string
	// KeyFileMode is the mode of tls.key and keystore.p12 (0: mirror's default).
	KeyFileMode fs.FileMode
	Logger      *slog.Logger
	// Registerer gets the reload and mirror metrics, named by MetricsOptions.
	Registerer     prometheus.Registerer
	MetricsOptions []metrics.Option
	// ReloadOptions apply to the material and the password file alike (poll
	// interval, settle window, component and its log key).
	ReloadOptions []hotcert.ReloadOption
	// Now is the clock Status judges the directory's validity by (default
	// time.Now).
	Now func() time.Time
}

// Mirroring is a running `hotcert mirror`.
type Mirroring struct {
	now func() time.Time
	r   *hotcert.Reloader
	m   *mirror.Mirror
	wg  sync.WaitGroup
}

// New loads the material, writes it into cfg.Dir and returns the process ready
// to Run. Missing or invalid material, or a password file that is, is an error.
func New(ctx context.Context, cfg Config) (*Mirroring, error) {
	var fopts []file.Option
	switch {
	case cfg.CertFile != "" || cfg.KeyFile != "":
		fopts = append(fopts, file.WithKeyPair(cfg.CertFile, cfg.KeyFile))
	case cfg.CredentialBundle != "":
		fopts = append(fopts, file.WithCredentialBundle(cfg.CredentialBundle))
	}
	if cfg.CAFile != "" {
		fopts = append(fopts, file.WithCA(cfg.CAFile))
	}
	src, err := file.New(append(fopts, file.WithLogger(cfg.Logger))...)
	if err != nil {
		return nil, err
	}
	rec, err := metrics.New(cfg.Registerer, cfg.MetricsOptions...)
	if err != nil {
		return nil, err
	}
	mrec, err := metrics.NewMirror(cfg.Registerer, cfg.MetricsOptions...)
	if err != nil {
		return nil, err
	}
	ropts := []hotcert.Option{hotcert.WithComponent(mirror.DefaultComponent), hotcert.WithLogger(cfg.Logger), hotcert.WithObserver(rec)}
	mopts := []mirror.Option{hotcert.WithComponent(mirror.DefaultComponent), hotcert.WithLogger(cfg.Logger), mirror.WithObserver(mrec)}
	for _, o := range cfg.ReloadOptions {
		ropts, mopts = append(ropts, o), append(mopts, o)
	}
	if cfg.PasswordFile != "" {
		mopts = append(mopts, mirror.WithPKCS12(cfg.PasswordFile))
	}
	if cfg.KeyFileMode != 0 {
		mopts = append(mopts, mirror.WithKeyFileMode(cfg.KeyFileMode))
	}
	r, err := hotcert.New(ctx, src, ropts...)
	if err != nil {
		return nil, err
	}
	m, err := mirror.New(ctx, r, cfg.Dir, mopts...)
	if err != nil {
		r.Close()
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Mirroring{now: now, r: r, m: m}, nil
}

// Run follows the material and the password file until ctx is done.
func (p *Mirroring) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, 2)
	p.wg.Go(func() { errs[0] = p.r.Start(ctx); cancel() })
	p.wg.Go(func() { errs[1] = p.m.Start(ctx); cancel() })
	p.wg.Wait()
	return errors.Join(errs...)
}

// Close stops Run and releases the watches.
func (p *Mirroring) Close() {
	p.m.Close()
	p.r.Close()
	p.wg.Wait()
}

// Status is what /healthz reports: what the process holds and what its
// directory holds, and the last failures of each. It holds names, fingerprints,
// times and counts, never key material or the password.
type Status struct {
	// Healthy is true while the material the directory holds is inside its
	// validity window (a refused input or a failed write leaves the last good
	// files in place: the failure counters are what to alert on).
	Healthy   bool   `json:"healthy"`
	Component string `json:"component"`
	// Held is what the process loaded (the *_info series say the same).
	Held hotcert.Summary `json:"held"`
	// LastError is the last reload failure of the material, cleared by the next
	// good load.
	LastError      string     `json:"last_error,omitempty"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty"`
	ReloadFailures uint64     `json:"reload_failures"`
	Mirror         Dir        `json:"mirror"`
}

// Dir describes the mirror directory.
type Dir struct {
	Path string `json:"path"`
	// InSync is true while the directory holds Held (with the password in use).
	InSync bool `json:"in_sync"`
	// Generation is the generation of Held the directory holds.
	Generation uint64    `json:"generation"`
	Files      []string  `json:"files"`
	WrittenAt  time.Time `json:"written_at"`
	NotAfter   time.Time `json:"not_after"`
	Updates    uint64    `json:"updates"`
	// LastError and LastReason (password, encode, write) are the last failure
	// of the mirror, cleared by the next update that succeeds.
	LastError   string     `json:"last_error,omitempty"`
	LastReason  string     `json:"last_reason,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	Failures    uint64     `json:"failures"`
}

// Status returns the process's status.
func (p *Mirroring) Status() Status {
	rs, ms := p.r.Status(), p.m.Status()
	st := Status{
		Component:      mirror.DefaultComponent,
		Held:           rs.Current.Summary(),
		ReloadFailures: rs.Failures,
		Mirror: Dir{Path: ms.Dir, InSync: ms.InSync, Generation: ms.Generation, Files: ms.Files,
			WrittenAt: ms.Written.UTC(), NotAfter: ms.NotAfter.UTC(), Updates: ms.Updates, LastReason: ms.LastReason, Failures: ms.Failures},
	}
	if rs.LastError != nil {
		at := rs.LastErrorAt.UTC()
		st.LastError, st.LastErrorAt = rs.LastError.Error(), &at
	}
	if ms.LastError != nil {
		at := ms.LastErrorAt.UTC()
		st.Mirror.LastError, st.Mirror.LastErrorAt = ms.LastError.Error(), &at
	}
	now := p.now()
	st.Healthy = ms.Generation > 0 && !now.Before(ms.NotBefore) && !now.After(ms.NotAfter) // both inclusive, as in validation
	return st
}

// HealthHandler serves Status as JSON: 200 while healthy, else 503.
func (p *Mirroring) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := p.Status()
		w.Header().Set("Content-Type", "application/json")
		if !st.Healthy {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
	})
}
