package controlplane

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/hotcert/hotcert/internal/inspect"
)

// Status is what /healthz reports: the certificate the next handshake serves, the
// last reload error (the last good certificate keeps serving meanwhile) and the
// connected agents.
type Status struct {
	// Healthy is true while the served certificate is inside its validity window.
	Healthy   bool   `json:"healthy"`
	Replica   string `json:"replica"`
	Component string `json:"component"`
	// Serving is the certificate new handshakes get.
	Serving    inspect.Certificate `json:"serving"`
	Source     string              `json:"source"`
	Generation uint64              `json:"generation"`
	LoadedAt   time.Time           `json:"loaded_at"`
	// LastError is the last reload failure, cleared by the next good load.
	LastError      string     `json:"last_error,omitempty"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty"`
	ReloadFailures uint64     `json:"reload_failures"`
	// ClientCA is the client CA bundle in use (mTLS only).
	ClientCA []inspect.Certificate `json:"client_ca,omitempty"`
	Stats    Stats                 `json:"stats"`
}

// Status returns the server's status.
func (s *Server) Status() Status {
	rs := s.cert.Status()
	st := Status{
		Replica:        s.cfg.Replica,
		Component:      s.cfg.Component,
		Serving:        inspect.Describe(rs.Current.Leaf()),
		Source:         rs.Current.Source(),
		Generation:     rs.Current.Generation(),
		LoadedAt:       rs.Current.LoadedAt().UTC(),
		ReloadFailures: rs.Failures,
		Stats:          s.Stats(),
	}
	now := time.Now()
	st.Healthy = !now.Before(rs.Current.NotBefore()) && now.Before(rs.Current.NotAfter())
	if rs.LastError != nil {
		at := rs.LastErrorAt.UTC()
		st.LastError, st.LastErrorAt = rs.LastError.Error(), &at
	}
	if s.clientCA != nil {
		st.ClientCA = inspect.DescribeAll(s.clientCA.Current().TrustCertificates())
	}
	return st
}

// HealthHandler serves Status as JSON: 200 while a valid certificate is served
// (even if the last reload failed: serving the last good certificate is fine, the
// failure counter is what to alert on), 503 once the served certificate expired.
func (s *Server) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st := s.Status()
		writeJSON(w, st, st.Healthy)
	})
}

func writeJSON(w http.ResponseWriter, v any, ok bool) {
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
