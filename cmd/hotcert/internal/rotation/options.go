package rotation

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Replica is one control plane replica: a pod, not a load-balanced Service.
type Replica struct {
	// Address is host:port of its gRPC listener, dialed for a real TLS handshake to
	// see what it serves.
	Address string
	// StatusURL is its status endpoint (the server's /healthz on its metrics
	// address), read for its fleet view.
	StatusURL string
}

// Options say which rotation to look at and where.
type Options struct {
	// Replicas are every replica of the control plane.
	Replicas []Replica
	// OldCAFile and NewCAFile hold the CA being retired and the CA replacing it.
	OldCAFile, NewCAFile string
	// ServerName is the name the served certificate is checked against and sent as
	// SNI (default: the host of each address, as agents dialing it do).
	ServerName string
	// Timeout bounds each probe: one handshake and one status read (default 5s).
	Timeout time.Duration
	// MinAgents is how many connected agents must report for the first step to be
	// done. Departed agents the replicas still remember hold the step back by
	// themselves; an agent never seen (not started yet, or away longer than the
	// replicas remember) is not counted, so 0 lets a moment with no agent connected
	// read as done (the zero value; `hotcert rotation status` defaults to 1).
	MinAgents int
	// HTTPClient reads the status endpoints (default: a client with Timeout).
	HTTPClient *http.Client
}

// statusURLFor derives the status endpoint of a replica from its gRPC address and
// the port its status endpoint listens on: http://HOST:PORT/healthz.
func statusURLFor(address, statusPort string) (string, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return "", fmt.Errorf("replica %q: want host:port", address)
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, statusPort), Path: "/healthz"}).String(), nil
}

func (o *Options) check() error {
	switch {
	case len(o.Replicas) == 0:
		return errors.New("rotation: no replica given")
	case o.OldCAFile == "" || o.NewCAFile == "":
		return errors.New("rotation: both the old and the new CA are required")
	case o.MinAgents < 0:
		return fmt.Errorf("rotation: --min-agents %d: want 0 or more", o.MinAgents)
	}
	for _, r := range o.Replicas {
		if _, _, err := net.SplitHostPort(r.Address); err != nil {
			return fmt.Errorf("rotation: replica %q: want host:port", r.Address)
		}
		if u, err := url.Parse(r.StatusURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("rotation: replica %s: status URL %q: want http://host:port/healthz", r.Address, r.StatusURL)
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.Timeout}
	}
	return nil
}

// ReplicasFrom pairs replica addresses with their status endpoints: statusURLs
// given one per address, in order, or derived from statusPort (statusURLFor).
func ReplicasFrom(addresses, statusURLs []string, statusPort string) ([]Replica, error) {
	switch {
	case len(addresses) == 0:
		return nil, errors.New("rotation: name every replica with --replica HOST:PORT (one per pod, not a Service)")
	case len(statusURLs) > 0 && statusPort != "":
		return nil, errors.New("rotation: give --status-url per replica or --status-port, not both")
	case len(statusURLs) == 0 && statusPort == "":
		return nil, errors.New("rotation: say where each replica's status endpoint is: --status-url per replica, or --status-port")
	case len(statusURLs) > 0 && len(statusURLs) != len(addresses):
		return nil, fmt.Errorf("rotation: %d --replica and %d --status-url: give one status URL per replica, in the same order", len(addresses), len(statusURLs))
	}
	out := make([]Replica, 0, len(addresses))
	for i, a := range addresses {
		r := Replica{Address: a}
		if statusPort != "" {
			u, err := statusURLFor(a, statusPort)
			if err != nil {
				return nil, fmt.Errorf("rotation: %w", err)
			}
			r.StatusURL = u
		} else {
			r.StatusURL = statusURLs[i]
		}
		out = append(out, r)
	}
	return out, nil
}
