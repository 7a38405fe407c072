package controlplane

import (
	"cmp"
	"slices"
	"time"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// DefaultFleetRemember is how long an agent whose stream closed stays in the fleet
// view as departed, when Config.FleetRemember is not set: the trust guard's minute,
// longer than an agent takes to reconnect after a drain or a replica restart (its
// backoff is at most 30s by default), short enough that an agent gone for good (a
// restarted agent registers under a new id by default) holds a rotation back only
// that long.
const DefaultFleetRemember = DefaultTrustGuardRemember

// departure is what the server keeps of an agent whose stream closed: what the
// fleet view last showed of it, its last trust report (for the trust guard) and
// when its stream closed. The server keeps one per agent id, for Server.keep, and
// drops it as soon as the agent registers again.
type departure struct {
	agent agentrpc.FleetAgent
	trust *agentrpc.TrustReport
	at    time.Time
}

// keepFor is how long departures are kept: the longest of the fleet view's and the
// trust guard's windows (0: none is kept).
func (c *Config) keepFor() time.Duration {
	keep := max(c.FleetRemember, 0)
	if c.TrustGuard {
		keep = max(keep, c.TrustGuardRemember)
	}
	return keep
}

// departed remembers an agent whose stream closed and forgets the departures older
// than the server keeps them (bounded by the agents that closed within that time).
// It runs with s.mu held.
func (s *Server) departed(sess *session, now time.Time) {
	keep := s.cfg.keepFor()
	if keep <= 0 {
		return
	}
	for id, d := range s.gone {
		if now.Sub(d.at) >= keep {
			delete(s.gone, id)
		}
	}
	s.gone[sess.info.ID] = departure{agent: s.fleetAgent(sess), trust: sess.trust, at: now}
}

// departedAgents lists the departures younger than Config.FleetRemember of agents
// not connected now, by id. It runs with s.mu held.
func (s *Server) departedAgents(connected map[string]bool, now time.Time) []agentrpc.DepartedAgent {
	out := []agentrpc.DepartedAgent{}
	window := s.cfg.FleetRemember
	for id, d := range s.gone {
		if connected[id] || now.Sub(d.at) >= window {
			continue
		}
		out = append(out, agentrpc.DepartedAgent{FleetAgent: d.agent, LastSeen: d.at.UTC(), ForgetAt: d.at.Add(window).UTC()})
	}
	slices.SortFunc(out, func(a, b agentrpc.DepartedAgent) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// departuresWithin returns the last trust report of every agent whose stream closed
// less than window ago, that reported its trust and is not connected now (the trust
// guard counts them).
func (s *Server) departuresWithin(window time.Duration, connected map[string]bool) []*agentrpc.TrustReport {
	now := s.cfg.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*agentrpc.TrustReport
	for id, d := range s.gone {
		if d.trust != nil && !connected[id] && now.Sub(d.at) < window {
			out = append(out, d.trust)
		}
	}
	return out
}
