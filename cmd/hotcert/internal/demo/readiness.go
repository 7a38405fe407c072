package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
)

// serveStatus serves the replica's status endpoint (its fleet view), as hotcert
// server does on --metrics-bind-address, for the readiness checks of the CA phases.
func (w *world) serveStatus(ctx context.Context, r *replica) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: status endpoint of %s: %w", r.name, err)
	}
	r.statusURL = "http://" + ln.Addr().String() + "/healthz"
	hs := &http.Server{Handler: r.srv.HealthHandler(), ReadHeaderTimeout: 5 * time.Second}
	w.wg.Go(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("status endpoint stopped", "replica", r.name, "error", err)
		}
	})
	w.wg.Go(func() { <-ctx.Done(); _ = hs.Close() })
	return nil
}

// readinessOptions point hotcert rotation status at the replicas and the two CAs.
func (w *world) readinessOptions() rotation.Options {
	o := rotation.Options{
		OldCAFile:  filepath.Join(w.cfg.Out, "pki", "ca-2025.crt"),
		NewCAFile:  filepath.Join(w.cfg.Out, "pki", "ca-2026.crt"),
		ServerName: "localhost",
	}
	for _, r := range w.replicas {
		o.Replicas = append(o.Replicas, rotation.Replica{Address: r.addr, StatusURL: r.statusURL})
	}
	return o
}

// awaitReadiness waits, as `hotcert rotation status --wait STEP` does, until step
// is safe, and keeps the verdict for the phase line; step "" waits until the
// rotation is complete.
func (s *story) awaitReadiness(ctx context.Context, step string) error {
	o := s.w.readinessOptions()
	var rep *rotation.Report
	var err error
	if step != "" {
		rep, err = rotation.Wait(ctx, o, rotation.WaitOptions{Step: step, Timeout: s.w.cfg.PhaseTimeout, Interval: 100 * time.Millisecond})
	} else {
		var checkErr error
		err = s.w.waitFor(ctx, func() bool {
			rep, checkErr = rotation.Check(ctx, o)
			return checkErr != nil || rep.Next == ""
		})
		err = cmp.Or(checkErr, err)
	}
	if err != nil {
		return fmt.Errorf("readiness (hotcert rotation status): %w", err)
	}
	s.readiness = rep.Summary
	return nil
}
