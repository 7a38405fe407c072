package proxy

import (
	"context"
	"fmt"
	"net"
	"strings"
)

// Target is an address a proxy connects to: a TCP host:port or a unix socket path.
type Target struct {
	Network string // "tcp" or "unix"
	Address string
}

// ParseTarget reads "host:port", "tcp://host:port" or "unix:///path" (also
// "unix:/path").
func ParseTarget(s string) (Target, error) {
	switch {
	case strings.HasPrefix(s, "unix://"):
		s = strings.TrimPrefix(s, "unix://")
		if s == "" {
			return Target{}, fmt.Errorf("proxy: target %q: no socket path", "unix://")
		}
		return Target{Network: "unix", Address: s}, nil
	case strings.HasPrefix(s, "unix:"):
		return ParseTarget("unix://" + strings.TrimPrefix(s, "unix:"))
	case strings.HasPrefix(s, "tcp://"):
		s = strings.TrimPrefix(s, "tcp://")
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return Target{}, fmt.Errorf("proxy: target %q: want host:port or unix:///path: %w", s, err)
	}
	return Target{Network: "tcp", Address: s}, nil
}

func (t Target) String() string {
	if t.Network == "unix" {
		return "unix://" + t.Address
	}
	return t.Address
}

func (t Target) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, t.Network, t.Address)
}
