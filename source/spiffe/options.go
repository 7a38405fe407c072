package spiffe

import (
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// readTimeout bounds one read of the X.509 context from the agent, which answers
// from its cache at once when it is up.
const readTimeout = 10 * time.Second

// Defaults of a [Source].
const (
	// DefaultMaxReconnectDelay caps gRPC's redial backoff to the agent's socket
	// (gRPC's own default is two minutes): the agent is local, so once it is back,
	// the source is back within this delay.
	DefaultMaxReconnectDelay = 5 * time.Second
)

// Option configures a [Source].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	addr   string
	client []workloadapi.ClientOption
	picker func([]*x509svid.SVID) *x509svid.SVID
}

func defaults() config {
	bo := backoff.DefaultConfig
	bo.MaxDelay = DefaultMaxReconnectDelay
	return config{
		client: []workloadapi.ClientOption{workloadapi.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo}))},
	}
}

// WithAddr sets the Workload API address, e.g. "unix:///run/spire/agent.sock"
// (default: the SPIFFE_ENDPOINT_SOCKET environment variable, as go-spiffe reads it).
func WithAddr(addr string) Option { return optionFunc(func(c *config) { c.addr = addr }) }

// WithClientOptions passes options to go-spiffe's Workload API client, after the
// source's own: gRPC dial options (workloadapi.WithDialOptions), the stream's retry
// backoff (workloadapi.WithBackoffStrategy), go-spiffe's logger.
func WithClientOptions(opts ...workloadapi.ClientOption) Option {
	return optionFunc(func(c *config) { c.client = append(c.client, opts...) })
}

// WithSVIDPicker chooses the SVID to serve when the workload has several (default:
// the first, the Workload API's default identity). A picker that returns nil makes
// the read fail with [hotcert.ReasonMissing].
func WithSVIDPicker(pick func([]*x509svid.SVID) *x509svid.SVID) Option {
	return optionFunc(func(c *config) { c.picker = pick })
}
