// Package agentrpc is the wire protocol between hotcert's reference control plane
// (internal/controlplane) and agent (internal/agent): one bidirectional gRPC stream
// per agent, described by a hand-written grpc.ServiceDesc, carrying messages encoded
// as the well-known google.protobuf.Struct type, so no code generation is needed.
//
// An agent opens the stream, sends a register message and waits for registered;
// it then sends a heartbeat every interval (acknowledged by the server), and the
// server pushes work items whenever it has some.
//
// A server that authenticates agents verifies the bearer token presented when the
// stream opens (gRPC metadata "authorization", see package jwtkeys/jwtgrpc) and hands
// the agent fresh tokens in the registered reply and, from time to time, in heartbeat
// acknowledgements: the agent presents the newest one on its next connection.
//
// The package also holds the fleet view built from the agents' trust reports
// (Fleet): the part of a replica's status that `hotcert rotation` reads, so that
// client depends on the contract, not on the server.
package agentrpc

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// Names of the service and its one stream method.
const (
	ServiceName = "hotcert.controlplane.v1.ControlPlane"
	StreamName  = "Connect"
	// ConnectMethod is the full method name an agent opens its stream on.
	ConnectMethod = "/" + ServiceName + "/" + StreamName
)

// StreamDesc describes the Connect stream for grpc.ClientConn.NewStream.
var StreamDesc = grpc.StreamDesc{StreamName: StreamName, ServerStreams: true, ClientStreams: true}

// ServiceDesc returns the service description with handler serving each Connect
// stream. Register it with grpc.Server.RegisterService(desc, nil).
func ServiceDesc(handler func(grpc.ServerStream) error) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{
			StreamName:    StreamName,
			Handler:       func(_ any, s grpc.ServerStream) error { return handler(s) },
			ServerStreams: true,
			ClientStreams: true,
		}},
		Metadata: "hotcert/controlplane/v1 (hand-written, google.protobuf.Struct messages)",
	}
}

// Type says what a message is.
type Type string

// Message types. Agents send Register (first) and Heartbeat; the server answers
// Registered and HeartbeatAck and pushes Work.
const (
	TypeRegister     Type = "register"
	TypeRegistered   Type = "registered"
	TypeHeartbeat    Type = "heartbeat"
	TypeHeartbeatAck Type = "heartbeat_ack"
	TypeWork         Type = "work"
)

// Message is one message of the stream, in either direction. Fields that do not
// apply to a Type are empty.
type Message struct {
	Type Type
	// AgentID identifies the agent (Register).
	AgentID string
	// Replica names the control plane replica (Registered).
	Replica string
	// Seq numbers heartbeats (Heartbeat, HeartbeatAck) and work items (Work).
	Seq uint64
	// Payload is the work to do (Work).
	Payload string
	// Token is a fresh bearer token for the agent's next connection (Registered,
	// HeartbeatAck), from a server that authenticates agents.
	Token string
	// Trust is what the agent trusts and presents (Register, Heartbeat); nil from an
	// agent of an older release.
	Trust *TrustReport
}

// Proto encodes m as a google.protobuf.Struct.
func (m Message) Proto() *structpb.Struct {
	f := map[string]*structpb.Value{"type": structpb.NewStringValue(string(m.Type))}
	if m.AgentID != "" {
		f["agent_id"] = structpb.NewStringValue(m.AgentID)
	}
	if m.Replica != "" {
		f["replica"] = structpb.NewStringValue(m.Replica)
	}
	if m.Seq != 0 {
		// A string keeps all 64 bits (a Struct number is a float64).
		f["seq"] = structpb.NewStringValue(strconv.FormatUint(m.Seq, 10))
	}
	if m.Payload != "" {
		f["payload"] = structpb.NewStringValue(m.Payload)
	}
	if m.Token != "" {
		f["token"] = structpb.NewStringValue(m.Token)
	}
	putTrust(f, m.Trust)
	return &structpb.Struct{Fields: f}
}

// FromProto decodes a message encoded by Message.Proto.
func FromProto(s *structpb.Struct) (Message, error) {
	str := func(k string) string { return s.GetFields()[k].GetStringValue() }
	m := Message{Type: Type(str("type")), AgentID: str("agent_id"), Replica: str("replica"), Payload: str("payload"), Token: str("token")}
	if m.Type == "" {
		return Message{}, fmt.Errorf("agentrpc: message without a type")
	}
	if v := str("seq"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return Message{}, fmt.Errorf("agentrpc: %s message: bad seq %q", m.Type, v)
		}
		m.Seq = n
	}
	trust, err := trustOf(s, m.Type)
	if err != nil {
		return Message{}, err
	}
	m.Trust = trust
	return m, nil
}

// Send writes m on a client or server stream.
func Send(s interface{ SendMsg(any) error }, m Message) error { return s.SendMsg(m.Proto()) }

// Recv reads the next message from a client or server stream.
func Recv(s interface{ RecvMsg(any) error }) (Message, error) {
	in := new(structpb.Struct)
	if err := s.RecvMsg(in); err != nil {
		return Message{}, err
	}
	return FromProto(in)
}
