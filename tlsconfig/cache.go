package tlsconfig

import (
	"crypto/tls"
	"sync/atomic"

	"github.com/hotcert/hotcert"
)

// prepared is a config built for one pair of Materials.
type prepared struct {
	identity, trust *hotcert.Material
	cfg             *tls.Config
	err             error
}

// configCache holds the config prepared for the current Materials. Materials are
// immutable and a new one is published on every change, so the pair of pointers is
// a complete cache key: a hit costs two atomic loads and two comparisons, and a
// miss (once per rotation) builds a new config. Two handshakes that race on a miss
// may both build; the results are equivalent and the last one stays.
type configCache struct {
	cur   atomic.Pointer[prepared]
	build func(identity, trust *hotcert.Material) (*tls.Config, error)
}

func (c *configCache) get(identity, trust *hotcert.Material) (*tls.Config, error) {
	if p := c.cur.Load(); p != nil && p.identity == identity && p.trust == trust {
		return p.cfg, p.err
	}
	cfg, err := c.build(identity, trust)
	c.cur.Store(&prepared{identity: identity, trust: trust, cfg: cfg, err: err})
	return cfg, err
}
