package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/httptls"
	tlsmetrics "github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/rollout/webhook"
	"github.com/hotcert/hotcert/source/file"
)

// webhookServer serves the admission webhook of package rollout/webhook
// over TLS, with its certificate hot-reloaded by hotcert (a cert-manager
// renewal is served at the next handshake, no restart). It runs on every
// replica: the API server may call any of them.
type webhookServer struct {
	addr   string
	tls    *hotcert.Reloader
	logger logr.Logger
	// handler is the logger's handler: it discards until the manager's
	// logger is known (SetupWithManager), then writes to it.
	handler *lateHandler
	reg     prometheus.Registerer
	rec     prometheus.Collector
	ready   chan net.Addr // receives the listening address, for tests
}

// newWebhookServer loads the serving certificate (a bad one is a startup error)
// and returns the server, not yet listening.
func newWebhookServer(addr, certFile, keyFile string, o Options) (*webhookServer, error) {
	o = o.Default()
	handler := newLateHandler()
	src, err := file.New(file.WithKeyPair(certFile, keyFile))
	if err != nil {
		return nil, fmt.Errorf("controller: webhook certificate: %w", err)
	}
	// Registered once the certificate loads: a startup error leaves no
	// collectors behind.
	rec, err := tlsmetrics.New(nil, tlsmetrics.WithPrefix(o.MetricsPrefix))
	if err != nil {
		return nil, fmt.Errorf("controller: webhook certificate metrics: %w", err)
	}
	rl, err := hotcert.New(context.Background(), src,
		hotcert.WithComponent("webhook"),
		hotcert.WithLogger(slog.New(handler)),
		hotcert.WithObserver(rec))
	if err != nil {
		return nil, fmt.Errorf("controller: webhook certificate: %w", err)
	}
	if err := o.Registerer.Register(rec); err != nil {
		rl.Close()
		return nil, fmt.Errorf("controller: webhook certificate metrics: %w", err)
	}
	return &webhookServer{addr: addr, tls: rl, logger: logr.FromSlogHandler(handler), handler: handler, reg: o.Registerer, rec: rec}, nil
}

// close releases the certificate's reloader and its metrics, for a server that
// is never started.
func (w *webhookServer) close() {
	w.tls.Close()
	w.reg.Unregister(w.rec)
}

// useLogger makes the server log to logger from now on.
func (w *webhookServer) useLogger(logger logr.Logger) { w.handler.set(logr.ToSlogHandler(logger)) }

// NeedLeaderElection: every replica serves the webhook.
func (w *webhookServer) NeedLeaderElection() bool { return false }

// Start serves until ctx is done.
func (w *webhookServer) Start(ctx context.Context) error {
	defer w.tls.Close()
	go func() {
		if err := w.tls.Start(ctx); err != nil && ctx.Err() == nil {
			w.logger.Error(err, "webhook certificate reloading stopped")
		}
	}()
	ln, err := net.Listen("tcp", w.addr)
	if err != nil {
		return fmt.Errorf("controller: webhook: %w", err)
	}
	if w.ready != nil {
		w.ready <- ln.Addr()
	}
	mux := http.NewServeMux()
	mux.Handle("/mutate", webhook.Handler())
	srv := &http.Server{Handler: mux, TLSConfig: httptls.ServerConfig(w.tls), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	w.logger.Info("serving the admission webhook", "address", ln.Addr().String(), "path", "/mutate")
	select {
	case err := <-errc:
		return fmt.Errorf("controller: webhook: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("controller: webhook shutdown: %w", err)
	}
	return nil
}
