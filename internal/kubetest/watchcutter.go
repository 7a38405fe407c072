package kubetest

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// WatchCutter breaks a client's open watches on demand, as a network failure or an
// API server's load balancer does; the client's informers then re-watch (and
// re-list) with whatever access they have by then. It also counts the client's
// requests, so a test can tell reads served from an informer's cache (no request)
// from reads that went to the API server. Install it with
// restConfig.Wrap(cutter.Wrap) before building the client.
type WatchCutter struct {
	requests atomic.Int64
	mu       sync.Mutex
	bodies   []io.Closer
}

// Requests returns how many requests the client has sent through Wrap.
func (c *WatchCutter) Requests() int64 { return c.requests.Load() }

// Wrap is a rest.Config transport wrapper that remembers every watch response.
func (c *WatchCutter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.requests.Add(1)
		resp, err := rt.RoundTrip(req)
		if err == nil && req.URL.Query().Get("watch") == "true" {
			c.mu.Lock()
			c.bodies = append(c.bodies, resp.Body)
			c.mu.Unlock()
		}
		return resp, err
	})
}

// Cut closes every watch opened through Wrap so far.
func (c *WatchCutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bodies {
		b.Close()
	}
	c.bodies = nil
}

// RoundTripperFunc is a function as an http.RoundTripper: what a test's
// transport wrapper (rest.Config.Wrap) returns.
type RoundTripperFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
