package controlplane

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/jwtkeys"
)

// Server metrics, derived from Stats at scrape time (one source of truth).
var (
	descConnected = prometheus.NewDesc("hotcert_controlplane_connected_agents",
		"Agent streams currently open.", nil, nil)
	descOpened = prometheus.NewDesc("hotcert_controlplane_streams_opened_total",
		"Agent streams opened (agents registered).", nil, nil)
	descClosed = prometheus.NewDesc("hotcert_controlplane_streams_closed_total",
		"Agent streams that ended, for any reason.", nil, nil)
	descHandshakes = prometheus.NewDesc("hotcert_controlplane_tls_handshakes_total",
		"Server-side TLS handshakes by result.", []string{"result"}, nil)
	descHandshakeFailures = prometheus.NewDesc("hotcert_controlplane_tls_handshake_failures_total",
		"Failed server-side TLS handshakes by reason (peer_rejected: the agent refused the certificate).", []string{"reason"}, nil)
	descHeartbeats = prometheus.NewDesc("hotcert_controlplane_heartbeats_received_total",
		"Heartbeats received from agents.", nil, nil)
	descWork = prometheus.NewDesc("hotcert_controlplane_work_items_sent_total",
		"Work items pushed to agents.", nil, nil)
	descTokensIssued = prometheus.NewDesc("hotcert_controlplane_tokens_issued_total",
		"Bearer tokens handed to agents (registered replies and heartbeat acknowledgements).", nil, nil)
	descTokensRejected = prometheus.NewDesc("hotcert_controlplane_token_rejections_total",
		"Agent streams and RPCs refused for their bearer token, by reason (missing, subject, expired, unknown_key, ...).", []string{"reason"}, nil)
)

type collector struct{ s *Server }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnected, descOpened, descClosed, descHandshakes, descHandshakeFailures, descHeartbeats, descWork, descTokensIssued, descTokensRejected} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, float64(st.ConnectedAgents))
	counter(descOpened, st.StreamsOpened)
	counter(descClosed, st.StreamsClosed)
	counter(descHandshakes, st.Handshakes, "success")
	counter(descHandshakes, st.HandshakeFailures, "failure")
	// Every known reason is exported from the start (0 until it occurs), so an alert
	// on increase(...) > 0 sees the first failure.
	reasons, n := agentrpc.WithZeros(st.FailuresByReason, agentrpc.HandshakeReasons())
	for i, r := range reasons {
		counter(descHandshakeFailures, n[i], r)
	}
	counter(descHeartbeats, st.HeartbeatsReceived)
	counter(descWork, st.WorkItemsSent)
	if c.s.cfg.Tokens != nil {
		counter(descTokensIssued, st.TokensIssued)
		reasons, n := agentrpc.WithZeros(st.TokensRejectedByReason, TokenRejectionReasons())
		for i, r := range reasons {
			counter(descTokensRejected, n[i], r)
		}
	}
}

// TokenRejectionReasons lists the reasons a token is refused with: the label values
// of hotcert_controlplane_token_rejections_total.
func TokenRejectionReasons() []string {
	out := []string{AuthReasonMissing, AuthReasonSubject}
	for _, r := range []jwtkeys.RejectReason{
		jwtkeys.ReasonMalformed, jwtkeys.ReasonUnknownKey, jwtkeys.ReasonKeyRetired, jwtkeys.ReasonAlgorithm,
		jwtkeys.ReasonSignature, jwtkeys.ReasonExpired, jwtkeys.ReasonNotYetValid, jwtkeys.ReasonClaims,
	} {
		out = append(out, string(r))
	}
	return out
}
