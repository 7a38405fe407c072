package controlplane

import (
	"cmp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// report keeps what an agent said it trusts; a message without a report (an agent
// of an older release) changes nothing.
func (s *Server) report(sess *session, t *agentrpc.TrustReport) {
	if t == nil {
		return
	}
	now := time.Now().UTC()
	s.mu.Lock()
	sess.trust, sess.reportedAt = t, now
	s.mu.Unlock()
	if s.guard != nil && s.guard.pending() {
		s.guard.evaluate()
	}
}

// Fleet returns what the connected agents trust.
func (s *Server) Fleet() agentrpc.Fleet {
	f := agentrpc.Fleet{ByTrustReading: map[string]int{agentrpc.TrustPerConnect: 0, agentrpc.TrustAtStart: 0, agentrpc.TrustUnknown: 0}, CAs: []agentrpc.FleetCA{}, AgentList: []agentrpc.FleetAgent{}}
	byFP := map[string]*agentrpc.FleetCA{}
	s.mu.Lock()
	for sess := range s.sessions {
		a := agentrpc.FleetAgent{ID: sess.info.ID, Remote: sess.info.Remote, Since: sess.info.Since.UTC(), TrustReading: agentrpc.TrustUnknown}
		if t := sess.trust; t != nil {
			a.TrustReading = agentrpc.TrustAtStart
			if t.PerConnect {
				a.TrustReading = agentrpc.TrustPerConnect
			}
			at := sess.reportedAt
			a.ReportedAt, a.ClientCert = &at, t.Leaf
			for _, ca := range t.CAs {
				if slices.Contains(a.CAs, ca.SHA256) {
					continue // a bundle listing one CA twice trusts it once
				}
				a.CAs = append(a.CAs, ca.SHA256)
				c := byFP[ca.SHA256]
				if c == nil {
					c = &agentrpc.FleetCA{SHA256: ca.SHA256, Subject: ca.Subject}
					byFP[ca.SHA256] = c
				}
				c.Agents++
			}
		}
		f.ByTrustReading[a.TrustReading]++
		f.AgentList = append(f.AgentList, a)
	}
	s.mu.Unlock()
	f.Agents = len(f.AgentList)
	for _, c := range byFP {
		f.CAs = append(f.CAs, *c)
	}
	slices.SortFunc(f.CAs, func(a, b agentrpc.FleetCA) int {
		return cmp.Or(cmp.Compare(b.Agents, a.Agents), cmp.Compare(a.SHA256, b.SHA256))
	})
	slices.SortFunc(f.AgentList, func(a, b agentrpc.FleetAgent) int { return cmp.Compare(a.ID, b.ID) })
	return f
}

// Fleet metrics: counts, never one series per agent.
var (
	descAgentsTrustingCA = prometheus.NewDesc("hotcert_controlplane_agents_trusting_ca",
		"Connected agents whose CA bundle holds this CA (by fingerprint), as they last reported.", []string{"sha256", "subject"}, nil)
	descAgentsByTrustReading = prometheus.NewDesc("hotcert_controlplane_agents_by_trust_reading",
		"Connected agents by how they read their CA bundle: per_connect, at_start, unknown (an older release: at start only).", []string{"reading"}, nil)
)

type fleetCollector struct{ s *Server }

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descAgentsTrustingCA
	ch <- descAgentsByTrustReading
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.s.Fleet()
	for _, ca := range f.CAs {
		ch <- prometheus.MustNewConstMetric(descAgentsTrustingCA, prometheus.GaugeValue, float64(ca.Agents), ca.SHA256, ca.Subject)
	}
	for _, r := range []string{agentrpc.TrustPerConnect, agentrpc.TrustAtStart, agentrpc.TrustUnknown} {
		ch <- prometheus.MustNewConstMetric(descAgentsByTrustReading, prometheus.GaugeValue, float64(f.ByTrustReading[r]), r)
	}
}
