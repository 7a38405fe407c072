package controlplane

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
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
	// Tokens describes the agent-token key set (Config.Tokens only).
	Tokens *TokenStatus `json:"tokens,omitempty"`
	Stats  Stats        `json:"stats"`
	// Held says what the replica holds (leaf fingerprint, serial, issuer, NotAfter,
	// generation, loaded-at); ClientCAHeld the client CA bundle (mTLS only).
	Held         hotcert.Summary  `json:"held"`
	ClientCAHeld *hotcert.Summary `json:"client_ca_held,omitempty"`
	// Fleet is what the connected agents trust, as they reported it.
	Fleet agentrpc.Fleet `json:"fleet"`
	// DenyList is the deny list the replica enforces (Config.DenyList only).
	DenyList *agentrpc.DenyListStatus `json:"deny_list,omitempty"`
}

// TokenStatus describes the key set agent tokens are issued and verified with. It
// holds key IDs, never key material.
type TokenStatus struct {
	// SigningKeyID and Algorithm name the key new tokens are signed with.
	SigningKeyID string `json:"signing_kid"`
	Algorithm    string `json:"alg"`
	// Keys lists every key that verifies, and why.
	Keys       []TokenKey `json:"keys"`
	Source     string     `json:"source"`
	Generation uint64     `json:"generation"`
	LoadedAt   time.Time  `json:"loaded_at"`
	// TokenTTL is the lifetime of the tokens handed to agents.
	TokenTTL string `json:"token_ttl"`
	// LastError is the last key reload failure (the last good keys keep signing and
	// verifying), cleared by the next good load.
	LastError      string     `json:"last_error,omitempty"`
	LastErrorAt    *time.Time `json:"last_error_at,omitempty"`
	ReloadFailures uint64     `json:"reload_failures"`
}

// TokenKey is one key that verifies agent tokens.
type TokenKey struct {
	ID        string `json:"kid"`
	Algorithm string `json:"alg"`
	// State is signing, listed (verifies only) or retired (within its grace period).
	State         string     `json:"state"`
	VerifiesUntil *time.Time `json:"verifies_until,omitempty"`
}

func (s *Server) tokenStatus() *TokenStatus {
	ks := s.cfg.Tokens
	if ks == nil {
		return nil
	}
	js := ks.Status()
	ts := &TokenStatus{
		SigningKeyID:   js.Current.SigningKeyID,
		Algorithm:      js.Current.Algorithm,
		Source:         js.Current.Source,
		Generation:     js.Current.Generation,
		LoadedAt:       js.Current.LoadedAt.UTC(),
		TokenTTL:       s.cfg.TokenTTL.String(),
		ReloadFailures: js.Failures,
	}
	for _, k := range js.Current.Keys {
		tk := TokenKey{ID: k.ID, Algorithm: k.Algorithm, State: string(k.State)}
		if !k.VerifiesUntil.IsZero() {
			u := k.VerifiesUntil.UTC()
			tk.VerifiesUntil = &u
		}
		ts.Keys = append(ts.Keys, tk)
	}
	if js.LastError != nil {
		at := js.LastErrorAt.UTC()
		ts.LastError, ts.LastErrorAt = js.LastError.Error(), &at
	}
	return ts
}

// Status returns the server's status.
func (s *Server) Status() Status {
	st, _ := s.status("", "")
	return st
}

// status is Status, its deny list answering for serial (hex) when not "", of
// issuer (the SHA-256 of the issuing CA certificate) when not "".
func (s *Server) status(serial, issuer string) (Status, error) {
	rs := s.cert.Status()
	served := s.serving.Current() // with the trust guard, possibly not yet rs.Current
	st := Status{
		Replica:        s.cfg.Replica,
		Component:      s.cfg.Component,
		Serving:        inspect.Describe(served.Leaf()),
		Source:         rs.Current.Source(),
		Generation:     rs.Current.Generation(),
		LoadedAt:       rs.Current.LoadedAt().UTC(),
		ReloadFailures: rs.Failures,
		Tokens:         s.tokenStatus(),
		Stats:          s.Stats(),
		Held:           rs.Current.Summary(),
		Fleet:          s.Fleet(),
	}
	now := time.Now()
	st.Healthy = !now.Before(served.NotBefore()) && now.Before(served.NotAfter())
	if rs.LastError != nil {
		at := rs.LastErrorAt.UTC()
		st.LastError, st.LastErrorAt = rs.LastError.Error(), &at
	}
	if s.clientCA != nil {
		st.ClientCA = inspect.DescribeAll(s.clientCA.Current().TrustCertificates())
		cs := s.clientCA.Current().Summary()
		st.ClientCAHeld = &cs
	}
	var err error
	st.DenyList, err = s.denyListStatus(serial, issuer)
	return st, err
}

// HealthHandler serves Status as JSON: 200 while a valid certificate is served
// (even if the last reload of the certificate or of the token keys failed: serving
// the last good material is fine, the failure counters are what to alert on), 503
// once the served certificate expired. With ?revoked_serial=HEX the deny list's
// status says whether this replica refuses that serial and how many of its open
// connections present it; with &revoked_issuer=SHA256 too, only the serial of
// that issuing CA (400 for a serial that is not hex or an issuer that is not a
// SHA-256).
func (s *Server) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, err := s.status(r.URL.Query().Get("revoked_serial"), r.URL.Query().Get("revoked_issuer"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
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
