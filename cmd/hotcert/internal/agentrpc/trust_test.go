package agentrpc

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/hotcert/hotcert"
)

// TestTrustReportIsBackwardCompatible: a report survives the wire; a message
// without one (an older agent) decodes with a nil Trust; an older reader of the
// message sees the fields it knows, unchanged; a broken report is an error.
func TestTrustReportIsBackwardCompatible(t *testing.T) {
	na := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	m := Message{Type: TypeHeartbeat, Seq: 9, Trust: &TrustReport{
		CAs:        []hotcert.CertificateSummary{{SHA256: "ab", Serial: "01", Subject: "CN=CA-2026", Issuer: "CN=CA-2026", NotAfter: na}},
		Leaf:       &hotcert.CertificateSummary{SHA256: "cd", Serial: "0ABC", Subject: "CN=agent-1", Issuer: "CN=CA-2026", NotAfter: na},
		PerConnect: true,
	}}
	s := overTheWire(t, m)
	got, err := FromProto(s)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v (trust %+v), %v", got, got.Trust, err)
	}
	// What an older release reads: the same known fields, the extra one ignored.
	if s.Fields["type"].GetStringValue() != "heartbeat" || s.Fields["seq"].GetStringValue() != "9" {
		t.Fatalf("known fields changed: %v", s.Fields)
	}
	old, err := FromProto((&Message{Type: TypeRegister, AgentID: "old"}).Proto())
	if err != nil || old.Trust != nil {
		t.Fatalf("a message of an older agent: %+v, %v", old, err)
	}
	bad, _ := structpb.NewStruct(map[string]any{"type": "heartbeat", "trust": "{not json"})
	if _, err := FromProto(bad); err == nil {
		t.Fatal("a broken trust report decoded")
	}
}
