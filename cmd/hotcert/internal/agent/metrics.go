package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// Agent metrics, derived from Stats at scrape time (one source of truth).
var (
	descConnected = prometheus.NewDesc("hotcert_agent_connected",
		"1 while a stream to the control plane is open.", nil, nil)
	descConnects = prometheus.NewDesc("hotcert_agent_connects_total",
		"Streams opened and registered (the first connection and every reconnect).", nil, nil)
	descConnectFailures = prometheus.NewDesc("hotcert_agent_connect_failures_total",
		"Failed attempts to open a stream, by reason.", []string{"reason"}, nil)
	descHandshakes = prometheus.NewDesc("hotcert_agent_tls_handshakes_total",
		"Client TLS handshakes by result.", []string{"result"}, nil)
	descHandshakeFailures = prometheus.NewDesc("hotcert_agent_tls_handshake_failures_total",
		"Failed client TLS handshakes by reason (unknown_authority, hostname, expired, peer_rejected, ...).", []string{"reason"}, nil)
	descDrops = prometheus.NewDesc("hotcert_agent_stream_drops_total",
		"Established streams that ended while the agent was running.", nil, nil)
	descUptime = prometheus.NewDesc("hotcert_agent_stream_uptime_seconds",
		"How long the current stream has been up (0 while disconnected).", nil, nil)
	descWork = prometheus.NewDesc("hotcert_agent_work_items_received_total",
		"Work items received from the control plane.", nil, nil)
	descTokens = prometheus.NewDesc("hotcert_agent_tokens_received_total",
		"Bearer tokens the control plane handed over (presented on the next connection).", nil, nil)
	descTokenExpiry = prometheus.NewDesc("hotcert_agent_token_expiry_timestamp_seconds",
		"Expiry of the newest token the control plane handed over (absent before the first).", nil, nil)
)

type collector struct{ a *Agent }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnected, descConnects, descConnectFailures, descHandshakes, descHandshakeFailures, descDrops, descUptime, descWork, descTokens, descTokenExpiry} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.a.Stats()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	connected := 0.0
	if st.Connected {
		connected = 1
	}
	gauge(descConnected, connected)
	gauge(descUptime, st.StreamUptime.Seconds())
	counter(descConnects, st.Connects)
	// Every known reason is exported from the start (0 until it occurs), so an alert
	// on increase(...) > 0 sees the first failure.
	reasons, n := agentrpc.WithZeros(st.ConnectFailuresByReason, agentrpc.ConnectReasons())
	for i, r := range reasons {
		counter(descConnectFailures, n[i], r)
	}
	counter(descHandshakes, st.Handshakes, "success")
	counter(descHandshakes, st.HandshakeFailures, "failure")
	reasons, n = agentrpc.WithZeros(st.HandshakeFailuresByReason, agentrpc.HandshakeReasons())
	for i, r := range reasons {
		counter(descHandshakeFailures, n[i], r)
	}
	counter(descDrops, st.StreamDrops)
	counter(descWork, st.WorkItems)
	if c.a.token != nil {
		counter(descTokens, st.TokensReceived)
		if st.TokenExpires != nil {
			gauge(descTokenExpiry, float64(st.TokenExpires.Unix()))
		}
	}
}
