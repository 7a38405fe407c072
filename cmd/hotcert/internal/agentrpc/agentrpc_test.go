package agentrpc

import (
	"errors"
	"math"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range []Message{
		{Type: TypeRegister, AgentID: "agent-1"},
		{Type: TypeRegistered, Replica: "cp-0"},
		{Type: TypeHeartbeat, Seq: math.MaxUint64},
		{Type: TypeWork, Seq: 7, Payload: "do it"},
		{Type: TypeRegistered, Replica: "cp-1", Token: "a.b.c"},
		{Type: TypeHeartbeatAck, Seq: 3, Token: "d.e.f"},
	} {
		got, err := FromProto(overTheWire(t, m))
		if err != nil || got != m {
			t.Fatalf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	if _, err := FromProto(&structpb.Struct{}); err == nil {
		t.Fatal("a message without a type decoded")
	}
	bad, _ := structpb.NewStruct(map[string]any{"type": "heartbeat", "seq": "x"})
	if _, err := FromProto(bad); err == nil {
		t.Fatal("a bad seq decoded")
	}
}

// overTheWire encodes m and decodes the bytes back, as the peer reads them.
func overTheWire(t *testing.T, m Message) *structpb.Struct {
	t.Helper()
	wire, err := proto.Marshal(m.Proto())
	if err != nil {
		t.Fatal(err)
	}
	s := new(structpb.Struct)
	if err := proto.Unmarshal(wire, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Once gRPC has wrapped a handshake error into a status, only its text is left.
func TestHandshakeReasonFromStatusText(t *testing.T) {
	for text, want := range map[string]string{
		`tls: failed to verify certificate: x509: certificate signed by unknown authority`:                ReasonUnknownAuthority,
		`tls: failed to verify certificate: x509: certificate is valid for localhost, not cp.example.com`: ReasonHostname,
		`x509: certificate has expired or is not yet valid: current time ...`:                             ReasonExpired,
		`remote error: tls: certificate required`:                                                         ReasonPeerRejected,
		`tls: first record does not look like a TLS handshake`:                                            ReasonNotTLS,
		`credentials: cannot check peer: missing selected ALPN property`:                                  ReasonALPN,
		`dial tcp 127.0.0.1:1: connect: connection refused`:                                               ReasonUnreachable,
		`something else`: ReasonOther,
	} {
		err := status.Error(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: "+text+"\"")
		if got := HandshakeReason(err); got != want {
			t.Errorf("%q: reason %q, want %q", text, got, want)
		}
	}
	if HandshakeReason(nil) != "" || HandshakeReason(errors.New("x")) != ReasonOther {
		t.Fatal("nil or plain errors misclassified")
	}
	if got := HandshakeReason(status.Error(codes.Unauthenticated, "token rejected: expired")); got != ReasonUnauthenticated {
		t.Fatalf("a refused token: reason %q, want %q", got, ReasonUnauthenticated)
	}
}

func TestWithZerosListsEveryKnownValueFirst(t *testing.T) {
	values, n := WithZeros(map[string]uint64{ReasonHostname: 2, "surprise": 1}, []string{ReasonUnknownAuthority, ReasonHostname})
	want := []string{ReasonUnknownAuthority, ReasonHostname, "surprise"}
	if !slices.Equal(values, want) || !slices.Equal(n, []uint64{0, 2, 1}) {
		t.Fatalf("WithZeros = %v %v, want %v [0 2 1]", values, n, want)
	}
	for _, r := range HandshakeReasons() {
		if r == ReasonUnauthenticated {
			t.Fatal("HandshakeReasons lists the token reason")
		}
	}
	if !slices.Contains(ConnectReasons(), ReasonUnauthenticated) {
		t.Fatal("ConnectReasons lacks unauthenticated")
	}
}
