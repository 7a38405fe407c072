package controlplane

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
)

// session is one agent stream.
type session struct {
	info AgentInfo
	work chan string // work pushed by Broadcast, sent by the stream's goroutine

	// The last token handed to the agent (read and written by the stream's goroutine).
	tokenAt  time.Time
	tokenKid string

	// What the agent last reported it trusts, and when (guarded by Server.mu).
	trust      *agentrpc.TrustReport
	reportedAt time.Time
}

// handle serves one Connect stream: register, then heartbeats in and work out until
// the agent leaves, the connection breaks or the server stops.
func (s *Server) handle(stream grpc.ServerStream) error {
	ctx := stream.Context()
	first, err := agentrpc.Recv(stream)
	if err != nil {
		return err
	}
	if first.Type != agentrpc.TypeRegister || first.AgentID == "" {
		return status.Errorf(codes.InvalidArgument, "first message must be %q with an agent id, got %q", agentrpc.TypeRegister, first.Type)
	}
	sess := &session{info: AgentInfo{ID: first.AgentID, Since: time.Now()}, work: make(chan string, 16)}
	if p, ok := peer.FromContext(ctx); ok {
		sess.info.Remote = addrString(p.Addr)
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
			c := ti.State.PeerCertificates[0]
			sess.info.ClientSubject, sess.info.ClientSerial = c.Subject.String(), hotcert.FormatSerial(c.SerialNumber)
		}
	}
	if s.cfg.Tokens != nil {
		// The interceptor verified the token; it must have been issued to this agent.
		claims, ok := jwtgrpc.ClaimsFromContext(ctx)
		if !ok || claims.Subject != first.AgentID {
			sub := ""
			if ok {
				sub = claims.Subject
			}
			s.authRejected(sess.info.Remote, first.AgentID, AuthReasonSubject,
				fmt.Errorf("token issued to %q, stream registers agent %q", sub, first.AgentID))
			return status.Error(codes.Unauthenticated, "token rejected: issued to another agent")
		}
	}
	if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeRegistered, Replica: s.cfg.Replica, Token: s.freshToken(sess, true)}); err != nil {
		return err
	}
	s.report(sess, first.Trust)
	s.addSession(sess)
	reason := "agent closed the stream"
	defer func() { s.removeSession(sess, reason) }()

	in := make(chan agentrpc.Message)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := agentrpc.Recv(stream)
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	var tick <-chan time.Time
	if s.cfg.WorkInterval > 0 {
		t := time.NewTicker(s.cfg.WorkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case m := <-in:
			if m.Type == agentrpc.TypeHeartbeat {
				s.heartbeats.Add(1)
				s.report(sess, m.Trust)
				ack := agentrpc.Message{Type: agentrpc.TypeHeartbeatAck, Seq: m.Seq, Token: s.freshToken(sess, false)}
				if err := agentrpc.Send(stream, ack); err != nil {
					reason = "send: " + err.Error()
					return err
				}
			}
		case payload := <-sess.work:
			if err := s.sendWork(stream, payload); err != nil {
				reason = "send: " + err.Error()
				return err
			}
		case <-tick:
			if err := s.sendWork(stream, ""); err != nil {
				reason = "send: " + err.Error()
				return err
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			reason = "receive: " + err.Error()
			return err
		case <-ctx.Done():
			reason = "connection closed: " + ctx.Err().Error()
			return ctx.Err()
		case <-drain.Draining(ctx):
			// The connection is being drained (a rotation, or the peer is no longer
			// trusted): end the stream cleanly so the agent re-opens it at once on a
			// new connection.
			reason = "drained"
			return nil
		case <-s.stopping:
			reason = "server shutting down"
			return status.Error(codes.Unavailable, "control plane replica shutting down")
		}
	}
}

// freshToken returns a new token for the session's agent when it needs one: always
// with force (the registered reply), otherwise once its last token is
// TokenRenewAfter old or the signing key changed since it was issued. It returns ""
// without a key set, when no token is due, or when issuing fails (logged; the agent
// keeps the token it holds and gets one with a later heartbeat).
func (s *Server) freshToken(sess *session, force bool) string {
	ks := s.cfg.Tokens
	if ks == nil {
		return ""
	}
	now := time.Now()
	kid := ks.SigningKeyID() // read before Issue: a rotation in between re-issues next time
	if !force && kid == sess.tokenKid && now.Sub(sess.tokenAt) < s.cfg.TokenRenewAfter {
		return ""
	}
	tok, err := ks.Issue(sess.info.ID, s.cfg.TokenTTL)
	if err != nil {
		s.log.Warn("issuing an agent token failed", s.cfg.ComponentKey, s.cfg.Component, "replica", s.cfg.Replica, "agent", sess.info.ID, "error", err.Error())
		return ""
	}
	sess.tokenAt, sess.tokenKid = now, kid
	s.tokensIssued.Add(1)
	return tok
}

func (s *Server) sendWork(stream grpc.ServerStream, payload string) error {
	seq := s.workSeq.Add(1)
	if payload == "" {
		payload = "work item " + strconv.FormatUint(seq, 10)
	}
	if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeWork, Seq: seq, Payload: payload}); err != nil {
		return fmt.Errorf("work item %d: %w", seq, err)
	}
	s.workSent.Add(1)
	return nil
}

func (s *Server) addSession(sess *session) {
	s.mu.Lock()
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	s.opened.Add(1)
	s.log.Debug("agent stream opened", s.cfg.ComponentKey, s.cfg.Component, "replica", s.cfg.Replica, "agent", sess.info.ID, "remote", sess.info.Remote)
	s.emit(Event{Kind: EventStreamOpened, AgentID: sess.info.ID, Remote: sess.info.Remote})
}

func (s *Server) removeSession(sess *session, reason string) {
	s.mu.Lock()
	delete(s.sessions, sess)
	trust := sess.trust
	s.mu.Unlock()
	if s.guard != nil {
		s.guard.streamClosed(sess.info.ID, trust)
	}
	s.closed.Add(1)
	d := time.Since(sess.info.Since)
	s.log.Debug("agent stream closed", s.cfg.ComponentKey, s.cfg.Component, "replica", s.cfg.Replica, "agent", sess.info.ID,
		"remote", sess.info.Remote, "duration", d.Round(time.Millisecond).String(), "reason", reason)
	s.emit(Event{Kind: EventStreamClosed, AgentID: sess.info.ID, Remote: sess.info.Remote, Duration: d, Reason: reason})
}

// Broadcast queues a work item for every connected agent and returns how many
// streams took it (a stream whose queue is full skips it).
func (s *Server) Broadcast(payload string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for sess := range s.sessions {
		select {
		case sess.work <- payload:
			n++
		default:
		}
	}
	return n
}
