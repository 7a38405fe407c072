package spiffe

import (
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Defaults of a [Source].
const (
	// DefaultReadTimeout bounds one read of the X.509 context from the agent.
	DefaultReadTimeout = 10 * time.Second
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
	addr        string
	client      []workloadapi.ClientOption
	picker      func([]*x509svid.SVID) *x509svid.SVID
	federated   bool
	readTimeout time.Duration
}

func defaults() config {
	bo := backoff.DefaultConfig
	bo.MaxDelay = DefaultMaxReconnectDelay
	return config{
		client:      []workloadapi.ClientOption{workloadapi.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo}))},
		readTimeout: DefaultReadTimeout,
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

// WithFederatedBundles makes the trust bundle the union of every bundle the agent
// delivers (the SVID's own trust domain first, then federated ones by trust domain
// name) instead of the SVID's own trust domain alone, so peers of federated trust
// domains are accepted too.
func WithFederatedBundles() Option { return optionFunc(func(c *config) { c.federated = true }) }

// WithReadTimeout bounds one read of the X.509 context (default
// [DefaultReadTimeout]; 0 or less keeps the default).
func WithReadTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.readTimeout = d
		}
	})
}
