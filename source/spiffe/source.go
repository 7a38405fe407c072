package spiffe

import (
	"context"
	"fmt"

	"github.com/spiffe/go-spiffe/v2/workloadapi"

	"github.com/hotcert/hotcert"
)

// Source reads the workload's X.509-SVID and trust bundle from the SPIFFE Workload
// API. Create it with [New]; it is safe for concurrent use.
type Source struct {
	cfg    config
	client *workloadapi.Client
	name   string
}

var _ hotcert.Source = (*Source)(nil)

// New returns a source for the Workload API at the address of [WithAddr]. It does
// not wait for the agent: the first [Source.Read] (hotcert.New's first load) does,
// and hotcert.WithInitialWait retries it while the agent starts or has not issued
// the SVID yet. Close the source when done.
func New(ctx context.Context, opts ...Option) (*Source, error) {
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	copts := cfg.client
	if cfg.addr != "" {
		copts = append([]workloadapi.ClientOption{workloadapi.WithAddr(cfg.addr)}, copts...)
	}
	client, err := workloadapi.New(ctx, copts...)
	if err != nil {
		return nil, fmt.Errorf("spiffe: Workload API client for %q: %w", cfg.addr, err)
	}
	addr := cfg.addr
	if addr == "" {
		addr, _ = workloadapi.GetDefaultAddress()
	}
	return &Source{cfg: cfg, client: client, name: "SPIFFE Workload API " + addr}, nil
}

// String names the Workload API, e.g. "SPIFFE Workload API unix:///run/spire/agent.sock".
func (s *Source) String() string { return s.name }

// Close closes the connection to the Workload API. Reads and watches fail afterwards.
func (s *Source) Close() error {
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("spiffe: closing the client of %s: %w", s, err)
	}
	return nil
}

// Read implements [hotcert.Source]: one fetch of the X.509 context, turned into
// content (see the package documentation). A failing read returns a [*hotcert.Error]
// naming the Workload API, with one reason for every read of one outage, so the
// Reloader reports the outage once.
func (s *Source) Read(ctx context.Context) (hotcert.Content, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	x, err := s.client.FetchX509Context(rctx)
	var c hotcert.Content
	if err == nil {
		c, err = s.content(x)
	}
	if err != nil {
		if ctx.Err() != nil {
			return hotcert.Content{}, fmt.Errorf("spiffe: reading %s: %w", s, err) // the caller gave up: not an outage
		}
		return hotcert.Content{}, readError(s.name, err)
	}
	return c, nil
}

// Watch implements [hotcert.Source]: it follows the Workload API's X.509 stream
// and calls changed on every update and on every stream error (the Reloader then
// re-reads, and reports an agent that went away). go-spiffe's client re-opens the
// stream after errors with its backoff (see [WithClientOptions]); Watch returns nil
// once ctx is done, or an error if the Workload API refuses the stream for good.
func (s *Source) Watch(ctx context.Context, changed func()) error {
	err := s.client.WatchX509Context(ctx, watcher(changed))
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("spiffe: watching %s: %w", s, err)
}

// watcher turns every event of the X.509 stream into a change notification: the
// Reloader reads the content itself, so an update's payload is not needed here.
type watcher func()

func (w watcher) OnX509ContextUpdate(*workloadapi.X509Context) { w() }
func (w watcher) OnX509ContextWatchError(error)                { w() }
