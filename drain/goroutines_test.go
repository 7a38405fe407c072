package drain_test

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"

	"google.golang.org/grpc"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// A connection of a drain.Server costs the goroutines grpc's own transport runs for
// it and no more: k idle streams add as many goroutines to a drain.Server as to a
// plain grpc.Server with the same credentials. When the peers leave, the
// connections are forgotten.
func TestConnectionsCostNoGoroutineBeyondGRPCs(t *testing.T) {
	ca := hotcerttest.MustNewCA()
	m := material(t, ca.MustIssue(), ca)
	f := newFixture(t, m, func(s *hotcert.Store) []drain.Option {
		return []drain.Option{drain.WithTrustCut(s), drain.WithIdentityDrain(s, 0)}
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := grpc.NewServer(grpc.Creds(grpccreds.NewMTLSServer(hotcert.NewStore(m))))
	plain.RegisterService(&desc, struct{}{})
	go plain.Serve(lis)
	t.Cleanup(plain.Stop)
	plainFixture := &fixture{addr: lis.Addr().String()}

	const k = 8
	// connect opens k agents' streams to fx and returns a func that ends them.
	connect := func(fx *fixture) (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, k)
		var ccs []*grpc.ClientConn
		for range k {
			a := dial(t, fx, ca.MustIssue(), ca)
			ccs = append(ccs, a.cc)
			go func() { a.watch(ctx); done <- struct{}{} }()
			<-a.serials
		}
		return func() {
			cancel()
			for range k {
				<-done
			}
			for _, cc := range ccs {
				cc.Close()
			}
		}
	}
	settle := func(what string, want func(n int) bool) int {
		t.Helper()
		var n int
		testutil.WaitFor(t, what, func() bool { n = runtime.NumGoroutine(); return want(n) })
		return n
	}

	base := runtime.NumGoroutine()
	stopPlain := connect(plainFixture)
	withPlain := settle("goroutines to settle with the plain server's streams", func(int) bool { return true })
	perPlain := withPlain - base
	stopPlain()
	settle("the plain server's connections to end", func(n int) bool { return n <= base })

	stopDrain := connect(f)
	settle(fmt.Sprintf("the drain.Server's %d streams to cost at most %d goroutines, as the plain server's", k, perPlain),
		func(n int) bool { return n-base <= perPlain })
	if f.srv.Conns() != k {
		t.Fatalf("Conns() = %d, want %d", f.srv.Conns(), k)
	}
	stopDrain()
	testutil.WaitFor(t, "the drain.Server to forget the closed connections", func() bool { return f.srv.Conns() == 0 })
	settle("the drain.Server's goroutines to end with its connections", func(n int) bool { return n <= base })
}
