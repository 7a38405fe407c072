package controlplane

import (
	"cmp"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// How a connected agent reads its trust bundle (FleetAgent.TrustReading).
const (
	// TrustPerConnect: the agent re-reads its bundle before every connection.
	TrustPerConnect = "per_connect"
	// TrustAtStart: the agent reported its bundle, which it reads only at start.
	TrustAtStart = "at_start"
	// TrustUnknown: the agent reported nothing — an agent of an older release, which
	// reads its bundle only at start.
	TrustUnknown = "unknown"
)

// Fleet is this replica's view of what its connected agents trust, from the
// reports they send with register and heartbeat messages.
type Fleet struct {
	// Agents counts the connected agent streams.
	Agents int `json:"agents"`
	// ByTrustReading counts them by how they read their bundle (TrustPerConnect,
	// TrustAtStart, TrustUnknown).
	ByTrustReading map[string]int `json:"by_trust_reading"`
	// CAs counts, per CA fingerprint, the connected agents whose bundle holds it.
	CAs []FleetCA `json:"cas"`
	// AgentList says, per connected agent, what it trusts.
	AgentList []FleetAgent `json:"agent_list"`
}

// FleetCA is one CA and how many connected agents trust it.
type FleetCA struct {
	// SHA256 is the CA's fingerprint, lower-case hex.
	SHA256  string `json:"sha256"`
	Subject string `json:"subject"`
	Agents  int    `json:"agents"`
}

// FleetAgent is what one connected agent last reported.
type FleetAgent struct {
	ID     string    `json:"id"`
	Remote string    `json:"remote"`
	Since  time.Time `json:"since"`
	// TrustReading is TrustPerConnect, TrustAtStart or TrustUnknown (then CAs is
	// empty: nothing is known of its bundle).
	TrustReading string `json:"trust_reading"`
	// CAs are the fingerprints (lower-case hex) of the CAs its bundle holds.
	CAs []string `json:"cas,omitempty"`
	// ClientCert is the client certificate it presents (mTLS only).
	ClientCert *hotcert.CertificateSummary `json:"client_cert,omitempty"`
	// ReportedAt is when it last reported (nil: never).
	ReportedAt *time.Time `json:"reported_at,omitempty"`
}

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
func (s *Server) Fleet() Fleet {
	f := Fleet{ByTrustReading: map[string]int{TrustPerConnect: 0, TrustAtStart: 0, TrustUnknown: 0}, CAs: []FleetCA{}, AgentList: []FleetAgent{}}
	byFP := map[string]*FleetCA{}
	s.mu.Lock()
	for sess := range s.sessions {
		a := FleetAgent{ID: sess.info.ID, Remote: sess.info.Remote, Since: sess.info.Since.UTC(), TrustReading: TrustUnknown}
		if t := sess.trust; t != nil {
			a.TrustReading = TrustAtStart
			if t.PerConnect {
				a.TrustReading = TrustPerConnect
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
					c = &FleetCA{SHA256: ca.SHA256, Subject: ca.Subject}
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
	slices.SortFunc(f.CAs, func(a, b FleetCA) int {
		return cmp.Or(cmp.Compare(b.Agents, a.Agents), cmp.Compare(a.SHA256, b.SHA256))
	})
	slices.SortFunc(f.AgentList, func(a, b FleetAgent) int { return cmp.Compare(a.ID, b.ID) })
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
	for _, r := range []string{TrustPerConnect, TrustAtStart, TrustUnknown} {
		ch <- prometheus.MustNewConstMetric(descAgentsByTrustReading, prometheus.GaugeValue, float64(f.ByTrustReading[r]), r)
	}
}
