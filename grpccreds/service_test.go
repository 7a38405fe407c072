package grpccreds_test

import (
	"context"
	"errors"
	"io"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// A test service without generated code: a unary Who that returns the client
// certificate's common name, and a bidirectional echo Stream.
const (
	whoMethod    = "/hotcert.test.Echo/Who"
	streamMethod = "/hotcert.test.Echo/Stream"
)

var echoDesc = grpc.ServiceDesc{
	ServiceName: "hotcert.test.Echo",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Who", Handler: whoHandler}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		Handler:       echoStream,
		ServerStreams: true,
		ClientStreams: true,
	}},
}

func whoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(emptypb.Empty)
	if err := dec(in); err != nil {
		return nil, err
	}
	h := func(ctx context.Context, _ any) (any, error) {
		p, _ := peer.FromContext(ctx)
		ti, ok := p.AuthInfo.(credentials.TLSInfo)
		if !ok {
			return nil, errors.New("not a TLS connection")
		}
		if len(ti.State.PeerCertificates) == 0 {
			return wrapperspb.String(""), nil
		}
		return wrapperspb.String(ti.State.PeerCertificates[0].Subject.CommonName), nil
	}
	if interceptor == nil {
		return h(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: whoMethod}, h)
}

func echoStream(_ any, stream grpc.ServerStream) error {
	for {
		m := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := stream.SendMsg(m); err != nil {
			return err
		}
	}
}

// trackingListener remembers accepted connections so a test can drop them all,
// as a control-plane restart or a network blip does.
type trackingListener struct {
	net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	accepted int
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.accepted++
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) dropAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (l *trackingListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

type testServer struct {
	port string
	lis  *trackingListener
}

func startServer(t *testing.T, creds credentials.TransportCredentials, opts ...grpc.ServerOption) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &trackingListener{Listener: ln}
	srv := grpc.NewServer(append([]grpc.ServerOption{grpc.Creds(creds)}, opts...)...)
	srv.RegisterService(&echoDesc, struct{}{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return &testServer{port: port, lis: lis}
}

func (s *testServer) addr(host string) string { return net.JoinHostPort(host, s.port) }

func dial(t *testing.T, target string, creds credentials.TransportCredentials, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// who calls Who, waiting for the channel to (re)connect, and returns the server
// certificate's serial number seen by the client and the name the server saw.
func who(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) (*big.Int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var p peer.Peer
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, whoMethod, &emptypb.Empty{}, out, append([]grpc.CallOption{grpc.Peer(&p), grpc.WaitForReady(true)}, opts...)...)
	if err != nil {
		return nil, "", err
	}
	return serialOf(&p), out.GetValue(), nil
}

func serialOf(p *peer.Peer) *big.Int {
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		return nil
	}
	return ti.State.PeerCertificates[0].SerialNumber
}

// dropAndWait drops the server's connections and waits until the channel has
// noticed, so that its next RPC reconnects instead of racing the dead connection.
func dropAndWait(t *testing.T, s *testServer, cc *grpc.ClientConn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The channel's state can lag the transport an RPC just used: let it catch up
	// first, or the drop could go unnoticed.
	for st := cc.GetState(); st == connectivity.Idle || st == connectivity.Connecting; st = cc.GetState() {
		if !cc.WaitForStateChange(ctx, st) {
			t.Fatal("timed out waiting for the channel to settle")
		}
	}
	s.lis.dropAll()
	for cc.GetState() == connectivity.Ready {
		if !cc.WaitForStateChange(ctx, connectivity.Ready) {
			t.Fatal("timed out waiting for the channel to notice the dropped connection")
		}
	}
}

// waitUntil polls cond every 10 ms for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
