package agentrpc

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hotcert/hotcert"
)

// TrustReport is what an agent says about its TLS material, in its register and
// heartbeat messages: the CA bundle it verifies the control plane against, its
// client certificate, and whether it re-reads the bundle before every connection.
//
// It travels as the field "trust", a JSON object in a string value, so the wire
// stays backward compatible both ways: a server of an older release ignores the
// field, and a message without it (an agent of an older release, which reads its
// bundle only at start) decodes with a nil Trust, which the control plane shows as
// unknown.
type TrustReport struct {
	// CAs are the CAs of the bundle the agent's next connection trusts.
	CAs []hotcert.CertificateSummary `json:"cas"`
	// Leaf is the agent's client certificate (nil without one).
	Leaf *hotcert.CertificateSummary `json:"leaf,omitempty"`
	// PerConnect is true when the agent re-reads its bundle before every connection.
	PerConnect bool `json:"per_connect"`
	// DenyListVersion is the version (revocation.List.Version) of the deny list the
	// agent checks servers against; empty without one.
	DenyListVersion string `json:"deny_list_version,omitempty"`
}

const trustField = "trust"

func putTrust(f map[string]*structpb.Value, t *TrustReport) {
	if t == nil {
		return
	}
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("agentrpc: encoding a trust report: %v", err)) // strings and bools only: cannot fail
	}
	f[trustField] = structpb.NewStringValue(string(b))
}

func trustOf(s *structpb.Struct, typ Type) (*TrustReport, error) {
	v := s.GetFields()[trustField].GetStringValue()
	if v == "" {
		return nil, nil
	}
	t := new(TrustReport)
	if err := json.Unmarshal([]byte(v), t); err != nil {
		return nil, fmt.Errorf("agentrpc: %s message: bad trust report: %w", typ, err)
	}
	return t, nil
}
