package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newProcessRegistry returns a registry with the Go and process collectors, for the
// /metrics of a long-running command.
func newProcessRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// route is one more path served beside /metrics and /healthz.
type route struct {
	path string
	h    http.Handler
}

// serveObservability serves /metrics (from reg), /healthz and the extra routes on
// addr until ctx is done. It returns once the listener is up, so a bad address is a
// startup error.
func serveObservability(ctx context.Context, addr string, reg *prometheus.Registry, health http.Handler, log *slog.Logger, routes ...route) (wait func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-bind-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.Handle("/healthz", health)
	paths := "/metrics /healthz"
	for _, r := range routes {
		mux.Handle(r.path, r.h)
		paths += " " + r.path
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("metrics and health listening", "addr", ln.Addr().String(), "paths", paths)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "error", err.Error())
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return func() { <-done }, nil
}
