package controlplane

import (
	"context"
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

// handle serves one Connect stream in named steps: register the agent (its first
// message, its peer, its token), welcome it (the registered reply, its trust, its
// session), then converse — heartbeats in and work out — until the agent leaves,
// the connection breaks or the server stops.
func (s *Server) handle(stream grpc.ServerStream) error {
	ctx := stream.Context()
	sess, trust, err := s.register(ctx, stream)
	if err != nil {
		return err
	}
	if err := s.welcome(stream, sess, trust); err != nil {
		return err
	}
	reason := reasonAgentClosed
	defer func() { s.removeSession(sess, reason) }()
	reason, err = s.converse(ctx, stream, sess)
	return err
}

// reasonAgentClosed is why a stream the agent ended closed.
const reasonAgentClosed = "agent closed the stream"

// register reads the stream's first message, which must register an agent, and
// returns the agent's session (who it is, from where, with which client
// certificate) and the trust it reports. With Config.Tokens the stream's token must
// have been issued to the agent id it registers.
func (s *Server) register(ctx context.Context, stream grpc.ServerStream) (*session, *agentrpc.TrustReport, error) {
	first, err := agentrpc.Recv(stream)
	if err != nil {
		return nil, nil, err
	}
	if first.Type != agentrpc.TypeRegister || first.AgentID == "" {
		return nil, nil, status.Errorf(codes.InvalidArgument, "first message must be %q with an agent id, got %q", agentrpc.TypeRegister, first.Type)
	}
	sess := &session{info: AgentInfo{ID: first.AgentID, Since: time.Now()}, work: make(chan string, 16)}
	identifyPeer(ctx, &sess.info)
	if err := s.checkTokenSubject(ctx, sess); err != nil {
		return nil, nil, err
	}
	return sess, first.Trust, nil
}

// welcome sends the agent the registered reply (with its first token), records the
// trust it registered with, and adds its session to the server's.
func (s *Server) welcome(stream grpc.ServerStream, sess *session, trust *agentrpc.TrustReport) error {
	if err := agentrpc.Send(stream, agentrpc.Message{Type: agentrpc.TypeRegistered, Replica: s.cfg.Replica, Token: s.freshToken(sess, true)}); err != nil {
		return err
	}
	s.report(sess, trust)
	s.addSession(sess)
	return nil
}

// identifyPeer fills in where the agent connects from and, over mTLS, the subject
// and serial of its client certificate.
func identifyPeer(ctx context.Context, info *AgentInfo) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return
	}
	info.Remote = addrString(p.Addr)
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
		c := ti.State.PeerCertificates[0]
		info.ClientSubject, info.ClientSerial = c.Subject.String(), hotcert.FormatSerial(c.SerialNumber)
	}
}

// checkTokenSubject, with Config.Tokens, refuses a stream whose token (the
// interceptor verified it) was issued to another agent than the one it registers.
func (s *Server) checkTokenSubject(ctx context.Context, sess *session) error {
	if s.cfg.Tokens == nil {
		return nil
	}
	id := sess.info.ID
	claims, ok := jwtgrpc.ClaimsFromContext(ctx)
	if ok && claims.Subject == id {
		return nil
	}
	sub := ""
	if ok {
		sub = claims.Subject
	}
	s.authRejected(sess.info.Remote, id, AuthReasonSubject, fmt.Errorf("token issued to %q, stream registers agent %q", sub, id))
	return status.Error(codes.Unauthenticated, "token rejected: issued to another agent")
}

// converse answers the agent's heartbeats and sends it work (Broadcast's, and every
// Config.WorkInterval) until the stream ends, and returns why it ended and the
// stream's error (nil when the agent closed it or the connection was drained).
func (s *Server) converse(ctx context.Context, stream grpc.ServerStream, sess *session) (string, error) {
	in, recvErr := receive(ctx, stream)
	var tick <-chan time.Time
	if s.cfg.WorkInterval > 0 {
		t := time.NewTicker(s.cfg.WorkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		var sendErr error
		select {
		case m := <-in:
			sendErr = s.heartbeat(stream, sess, m)
		case payload := <-sess.work:
			sendErr = s.sendWork(stream, payload)
		case <-tick:
			sendErr = s.sendWork(stream, "")
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return reasonAgentClosed, nil
			}
			return "receive: " + err.Error(), err
		case <-ctx.Done():
			return "connection closed: " + ctx.Err().Error(), ctx.Err()
		case <-drain.Draining(ctx):
			// The connection is being drained (a rotation, or the peer is no longer
			// trusted): end the stream cleanly so the agent re-opens it at once on a
			// new connection.
			return "drained", nil
		case <-s.stopping:
			return "server shutting down", status.Error(codes.Unavailable, "control plane replica shutting down")
		}
		if sendErr != nil {
			return "send: " + sendErr.Error(), sendErr
		}
	}
}

// receive reads the stream's messages in a goroutine of its own, until the stream
// breaks (the error is sent on the second channel) or its context is done.
func receive(ctx context.Context, stream grpc.ServerStream) (<-chan agentrpc.Message, <-chan error) {
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
	return in, recvErr
}

// heartbeat records the trust a heartbeat reports and acknowledges it, with a
// fresh token when one is due. Other messages are ignored.
func (s *Server) heartbeat(stream grpc.ServerStream, sess *session, m agentrpc.Message) error {
	if m.Type != agentrpc.TypeHeartbeat {
		return nil
	}
	s.heartbeats.Add(1)
	s.report(sess, m.Trust)
	ack := agentrpc.Message{Type: agentrpc.TypeHeartbeatAck, Seq: m.Seq, Token: s.freshToken(sess, false)}
	return agentrpc.Send(stream, ack)
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
		s.log.Warn("issuing an agent token failed", s.cfg.ComponentKey, s.cfg.Component, "agent", sess.info.ID, "error", err.Error())
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
	delete(s.gone, sess.info.ID) // back: no longer departed
	s.mu.Unlock()
	s.opened.Add(1)
	s.log.Debug("agent stream opened", s.cfg.ComponentKey, s.cfg.Component, "agent", sess.info.ID, "remote", sess.info.Remote)
	s.emit(Event{Kind: EventStreamOpened, AgentID: sess.info.ID, Remote: sess.info.Remote})
}

func (s *Server) removeSession(sess *session, reason string) {
	s.mu.Lock()
	delete(s.sessions, sess)
	s.departed(sess, s.cfg.Clock())
	s.mu.Unlock()
	s.closed.Add(1)
	d := time.Since(sess.info.Since)
	s.log.Debug("agent stream closed", s.cfg.ComponentKey, s.cfg.Component, "agent", sess.info.ID,
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
