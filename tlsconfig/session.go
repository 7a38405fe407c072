package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"strings"
)

// sessionNamePrefix marks the entry of tls.SessionState.Extra that holds the SNI
// name a session was established for (Extra is shared by every layer: entries are
// only appended, and recognised by their prefix).
var sessionNamePrefix = []byte("hotcert/sni/v1\x00")

// nameBoundSessions makes the sessions of a prepared server config resume only
// under the SNI name they were established for (RFC 6066 §3: the server MUST NOT
// accept a resumption whose server_name differs). crypto/tls alone resumes a
// session under any name, and every identity of a server shares the ticket keys of
// the outer config, so without this a session of one identity would resume under
// the host name of another — a client would be handed, without a certificate, a
// session for an identity it did not ask for. A ticket offered under another name
// is set aside: the handshake goes on as a full one, with the identity of the name
// asked for.
//
// Tickets are sealed with the ticket keys of keys, the config the caller hooked,
// whose keys crypto/tls would use itself (the prepared configs have none of their
// own), so sessions still resume across rotations. A WrapSession or UnwrapSession
// of the caller's config still runs, around hotcert's entry.
type nameBoundSessions struct {
	keys   *tls.Config
	wrap   func(tls.ConnectionState, *tls.SessionState) ([]byte, error)
	unwrap func([]byte, tls.ConnectionState) (*tls.SessionState, error)
}

// bindSessionsToName sets cfg's WrapSession and UnwrapSession (keeping cfg's own
// as the inner layer), sealing tickets with the keys of outer.
func bindSessionsToName(cfg, outer *tls.Config) {
	b := &nameBoundSessions{keys: outer, wrap: cfg.WrapSession, unwrap: cfg.UnwrapSession}
	cfg.WrapSession, cfg.UnwrapSession = b.wrapSession, b.unwrapSession
}

func (b *nameBoundSessions) wrapSession(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
	entry := make([]byte, 0, len(sessionNamePrefix)+len(cs.ServerName))
	entry = append(append(entry, sessionNamePrefix...), strings.ToLower(cs.ServerName)...)
	ss.Extra = append(ss.Extra, entry)
	if b.wrap != nil {
		return b.wrap(cs, ss)
	}
	return b.keys.EncryptTicket(cs, ss)
}

func (b *nameBoundSessions) unwrapSession(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
	var (
		ss  *tls.SessionState
		err error
	)
	if b.unwrap != nil {
		ss, err = b.unwrap(identity, cs)
	} else {
		ss, err = b.keys.DecryptTicket(identity, cs)
	}
	if ss == nil || err != nil {
		return ss, err
	}
	for _, e := range ss.Extra {
		if name, ok := bytes.CutPrefix(e, sessionNamePrefix); ok {
			if string(name) == strings.ToLower(cs.ServerName) {
				return ss, nil
			}
			break
		}
	}
	// Another name, or a ticket hotcert did not seal: a full handshake.
	return nil, nil
}
