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

// Fleet returns what the connected agents trust, and the agents departed less than
// Config.FleetRemember ago that have not come back.
func (s *Server) Fleet() agentrpc.Fleet {
	f := agentrpc.Fleet{ByTrustReading: map[string]int{agentrpc.TrustPerConnect: 0, agentrpc.TrustAtStart: 0, agentrpc.TrustUnknown: 0}, CAs: []agentrpc.FleetCA{}, AgentList: []agentrpc.FleetAgent{},
		RememberSeconds: max(s.cfg.FleetRemember, 0).Seconds()}
	byFP := map[string]*agentrpc.FleetCA{}
	now := s.cfg.Clock()
	s.mu.Lock()
	connected := make(map[string]bool, len(s.sessions))
	for sess := range s.sessions {
		a := s.fleetAgent(sess)
		connected[a.ID] = true
		for _, fp := range a.CAs {
			c := byFP[fp]
			if c == nil {
				c = &agentrpc.FleetCA{SHA256: fp, Subject: caSubject(sess.trust, fp)}
				byFP[fp] = c
			}
			c.Agents++
		}
		f.ByTrustReading[a.TrustReading]++
		f.AgentList = append(f.AgentList, a)
	}
	f.DepartedList = s.departedAgents(connected, now)
	s.mu.Unlock()
	f.Agents, f.Departed = len(f.AgentList), len(f.DepartedList)
	for _, c := range byFP {
		f.CAs = append(f.CAs, *c)
	}
	slices.SortFunc(f.CAs, func(a, b agentrpc.FleetCA) int {
		return cmp.Or(cmp.Compare(b.Agents, a.Agents), cmp.Compare(a.SHA256, b.SHA256))
	})
	slices.SortFunc(f.AgentList, func(a, b agentrpc.FleetAgent) int { return cmp.Compare(a.ID, b.ID) })
	return f
}

// fleetAgent is what the fleet view shows of one agent stream: who, since when, how
// it reads its bundle and, from its last report, the CAs it holds (each once) and its
// client certificate. It runs with s.mu held.
func (s *Server) fleetAgent(sess *session) agentrpc.FleetAgent {
	a := agentrpc.FleetAgent{ID: sess.info.ID, Remote: sess.info.Remote, Since: sess.info.Since.UTC(), TrustReading: agentrpc.TrustUnknown,
		PeerSerial: sess.info.ClientSerial}
	t := sess.trust
	if t == nil {
		return a
	}
	a.TrustReading = agentrpc.TrustAtStart
	if t.PerConnect {
		a.TrustReading = agentrpc.TrustPerConnect
	}
	at := sess.reportedAt
	a.ReportedAt, a.ClientCert, a.DenyListVersion = &at, t.Leaf, t.DenyListVersion
	for _, ca := range t.CAs {
		if !slices.Contains(a.CAs, ca.SHA256) { // a bundle listing one CA twice trusts it once
			a.CAs = append(a.CAs, ca.SHA256)
		}
	}
	return a
}

// caSubject is the subject t reports for the CA with fingerprint fp.
func caSubject(t *agentrpc.TrustReport, fp string) string {
	for _, ca := range t.CAs {
		if ca.SHA256 == fp {
			return ca.Subject
		}
	}
	return ""
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
