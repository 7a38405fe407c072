package controlplane_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/controlplane"
	"github.com/hotcert/hotcert/grpccreds"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/jwtkeys"
	"github.com/hotcert/hotcert/jwtkeys/jwtfile"
	"github.com/hotcert/hotcert/jwtkeys/jwtgrpc"
	"github.com/hotcert/hotcert/revocation"
	"github.com/hotcert/hotcert/source/file"
	"github.com/hotcert/hotcert/tlsconfig"
)

// BenchmarkScaleAgents connects N agents (1k, 5k, 10k) to one control plane replica
// over loopback gRPC with mTLS and bearer tokens, and, in the same run, to a plain
// grpc.Server with a static tls.Config serving the same stream protocol. Each agent
// is lightweight (one grpc.ClientConn, no reloader of its own) but uses the real
// client credentials (grpccreds.NewClient with a server name, jwtgrpc per-RPC
// tokens) and the real protocol: register, registered, one heartbeat and its ack,
// then the stream stays open.
//
// Client and server are separated by process: each server runs in a child process
// (this test binary re-executed, see TestMain) that measures itself —
// heap in use after a GC, VmRSS, goroutines and getrusage CPU — before the agents
// connect and once every agent holds its stream; the agents run in the benchmark
// process. The figures per connection are those deltas divided by N, so the agents'
// own memory and CPU are never counted. The CPU per connection is the server's whole
// cost of accepting an agent: TLS handshake, HTTP/2 setup, token verification,
// register and the first heartbeat.
//
// Four servers: plain (grpc.Server, static tls.Config, no tokens), plaintok (the
// same with the control plane's token work: the stream interceptor verifying the
// bearer token, a fresh token signed into the registered reply), controlplane (mTLS
// and tokens, no drain) and controlplane+drain (DrainWindow and CutUntrusted: one
// drain.Server with a grpc.Server per connection). Ratios are against plain ("-x")
// and against plaintok ("-xtok"): the second is what hotcert's machinery costs
// beyond the work any token-authenticated server does.
//
// -short connects 100 agents; HOTCERT_SCALE_AGENTS=1000,5000 picks the sizes and
// HOTCERT_SCALE_SERVERS=plaintok,cp the servers. The benchmark raises
// RLIMIT_NOFILE (each process holds one descriptor per agent) up to the hard limit
// and skips a size the hard limit cannot hold. With HOTCERT_SCALE_TSV=DIR each size
// updates its row of DIR/agents-scale.tsv (see scale_tsv_test.go).
func BenchmarkScaleAgents(b *testing.B) {
	kinds := scaleServers(b)
	for _, n := range scaleSizes(b) {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			if err := raiseNoFile(uint64(n) + 512); err != nil {
				b.Skip(err)
			}
			var res []scaleResult
			for range b.N {
				res = res[:0]
				for _, kind := range kinds {
					res = append(res, runScale(b, kind, n))
				}
			}
			logScaleTable(b, n, res)
			for _, r := range res {
				b.ReportMetric(r.Connect.Seconds(), r.Kind+"-connect-s")
				b.ReportMetric(r.HeapPerConn(), r.Kind+"-heapB/conn")
				b.ReportMetric(r.RSSPerConn(), r.Kind+"-rssB/conn")
				b.ReportMetric(r.GoroutinesPerConn(), r.Kind+"-goroutines/conn")
				b.ReportMetric(r.CPUPerConn().Seconds()*1e6, r.Kind+"-cpuµs/conn")
			}
			for _, base := range []struct{ kind, suffix string }{{scalePlain, "-x"}, {scalePlainTokens, "-xtok"}} {
				bi := slices.IndexFunc(res, func(r scaleResult) bool { return r.Kind == base.kind })
				if bi < 0 {
					continue
				}
				for _, r := range res[bi+1:] {
					heap, rss, cpu := r.ratios(res[bi])
					b.ReportMetric(heap, r.Kind+"-heap"+base.suffix)
					b.ReportMetric(rss, r.Kind+"-rss"+base.suffix)
					b.ReportMetric(cpu, r.Kind+"-cpu"+base.suffix)
				}
			}
			writeAgentsTSV(b, n, res)
		})
	}
}

// scaleServers are the servers BenchmarkScaleAgents measures, in order: every kind,
// or the list in HOTCERT_SCALE_SERVERS.
func scaleServers(b *testing.B) []string {
	all := []string{scalePlain, scalePlainTokens, scaleControlPlane, scaleDrain}
	v := strings.TrimSpace(os.Getenv("HOTCERT_SCALE_SERVERS"))
	if v == "" {
		return all
	}
	var kinds []string
	for k := range strings.SplitSeq(v, ",") {
		if k = strings.TrimSpace(k); !slices.Contains(all, k) {
			b.Fatalf("HOTCERT_SCALE_SERVERS=%q: %q is none of %v", v, k, all)
		}
		kinds = append(kinds, k)
	}
	return kinds
}

const (
	scalePlain        = "plain"
	scalePlainTokens  = "plaintok"
	scaleControlPlane = "cp"
	scaleDrain        = "cpdrain"

	scaleEnvServer = "HOTCERT_SCALE_SERVER" // set in the child: which server to run
	scaleEnvDir    = "HOTCERT_SCALE_DIR"    // set in the child: the PKI and token files
	scaleEnvN      = "HOTCERT_SCALE_N"      // set in the child: how many tokens to issue
	scaleEnvAddr   = "HOTCERT_SCALE_ADDR"   // optional in the child: the address to listen on
	scaleEnvWindow = "HOTCERT_SCALE_WINDOW" // optional in the child: the drain window
	scaleLine      = "hotcert-scale: "      // prefix of the child's protocol lines
)

// processSample is what a server process measures of itself.
type processSample struct {
	Heap       uint64        // runtime.MemStats.HeapInuse after a GC
	Stack      uint64        // runtime.MemStats.StackInuse
	RSS        uint64        // VmRSS
	Goroutines int           // runtime.NumGoroutine
	CPU        time.Duration // user + system CPU of the process
}

type scaleResult struct {
	Kind          string
	N             int
	Connect       time.Duration // from the first dial until every agent had its heartbeat acknowledged
	Before, After processSample
}

func (r scaleResult) HeapPerConn() float64 {
	return (float64(r.After.Heap) - float64(r.Before.Heap)) / float64(r.N)
}
func (r scaleResult) RSSPerConn() float64 {
	return (float64(r.After.RSS) - float64(r.Before.RSS)) / float64(r.N)
}
func (r scaleResult) StackPerConn() float64 {
	return (float64(r.After.Stack) - float64(r.Before.Stack)) / float64(r.N)
}
func (r scaleResult) GoroutinesPerConn() float64 {
	return float64(r.After.Goroutines-r.Before.Goroutines) / float64(r.N)
}
func (r scaleResult) CPUPerConn() time.Duration {
	return (r.After.CPU - r.Before.CPU) / time.Duration(r.N)
}

// ratios are r's heap, RSS and CPU per connection as multiples of base's.
func (r scaleResult) ratios(base scaleResult) (heap, rss, cpu float64) {
	return r.HeapPerConn() / base.HeapPerConn(), r.RSSPerConn() / base.RSSPerConn(), float64(r.CPUPerConn()) / float64(base.CPUPerConn())
}

func logScaleTable(b *testing.B, n int, res []scaleResult) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d agents (x: against %s)\n%-8s %10s %12s %12s %12s %10s %12s %8s %8s %8s\n", n, res[0].Kind, "server", "connect", "heap/conn", "stack/conn", "rss/conn", "gor/conn", "cpu/conn", "heap x", "rss x", "cpu x")
	for _, r := range res {
		heap, rss, cpu := r.ratios(res[0])
		fmt.Fprintf(&sb, "%-8s %10s %10.1fKiB %10.1fKiB %10.1fKiB %10.2f %12s %8.2f %8.2f %8.2f\n", r.Kind, r.Connect.Round(time.Millisecond),
			r.HeapPerConn()/1024, r.StackPerConn()/1024, r.RSSPerConn()/1024, r.GoroutinesPerConn(), r.CPUPerConn().Round(time.Microsecond), heap, rss, cpu)
	}
	b.Log(sb.String())
}

// raiseNoFile raises the soft RLIMIT_NOFILE to at least want, bounded by the hard
// limit; it fails when the hard limit is below want.
func raiseNoFile(want uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit: %w", err)
	}
	if lim.Max < want {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is below the %d descriptors this size needs per process", lim.Max, want)
	}
	if lim.Cur < want {
		lim.Cur = want
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("setrlimit: %w", err)
		}
	}
	return nil
}

// runScale starts a server of kind in a child process and connects n agents to it.
func runScale(b *testing.B, kind string, n int) scaleResult {
	b.Helper()
	pki := newScalePKI(b, kind != scalePlain)
	srv := startScaleServer(b, pki, kind, n)
	defer srv.stop(b)
	res := scaleResult{Kind: kind, N: n, Before: srv.before}
	addr := srv.addr
	var tokens []string
	if kind != scalePlain {
		tokens = readTokens(b, pki)
	}

	creds := pki.clientCreds(b)
	agentCtx, stopAgents := context.WithCancel(context.Background())
	conns := make([]*grpc.ClientConn, n)
	var wg sync.WaitGroup
	var failures atomic.Int64
	var firstErr firstError
	sem := make(chan struct{}, 64) // concurrent dials: well below the listen backlog
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			token := ""
			if tokens != nil {
				token = tokens[i]
			}
			cc, _, err := scaleAgent(agentCtx, addr, creds, scaleAgentID(i), token)
			conns[i] = cc
			if err != nil {
				failures.Add(1)
				firstErr.set(err)
			}
		})
	}
	wg.Wait()
	res.Connect = time.Since(start)
	defer func() {
		stopAgents()
		for _, cc := range conns {
			if cc != nil {
				cc.Close()
			}
		}
	}()
	if f := failures.Load(); f != 0 {
		b.Fatalf("%s: %d of %d agents failed to connect, first: %v", kind, f, n, firstErr.get())
	}

	res.After = srv.measure(b)
	return res
}

// scalePKI is the benchmark's CA, the server's and the agents' certificates and,
// with tokens, the signing key, as files in dir. The server's key pair is in the
// kubelet-style volume dir/tls and the client CA bundle in dir/ca (ca.crt), so a
// rotation or a bundle change can swap either atomically. The bundle also holds a
// second CA, dropped, whose agents (dropLeaf) a bundle change can cut.
type scalePKI struct {
	dir      string
	ca       *hotcerttest.CA
	cliLeaf  *hotcerttest.Leaf
	dropped  *hotcerttest.CA
	dropLeaf *hotcerttest.Leaf
	tls, cas *hotcerttest.AtomicWriter
	tokens   bool
}

const scaleCAFile = "ca/ca.crt" // the client CA bundle, in dir

func newScalePKI(b *testing.B, tokens bool) *scalePKI {
	b.Helper()
	p := &scalePKI{dir: b.TempDir(), ca: hotcerttest.MustNewCA(), dropped: hotcerttest.MustNewCA(), tokens: tokens}
	p.cliLeaf = p.ca.MustIssue(hotcerttest.WithCommonName("agent"))
	p.dropLeaf = p.dropped.MustIssue(hotcerttest.WithCommonName("agent of a dropped CA"))
	p.tls = hotcerttest.MustNewAtomicWriter(filepath.Join(p.dir, "tls"))
	p.cas = hotcerttest.MustNewAtomicWriter(filepath.Join(p.dir, "ca"))
	p.serve(b, p.ca.MustIssue())
	p.trust(b, p.ca, p.dropped)
	files := map[string][]byte{}
	if tokens {
		priv, err := jwtkeys.GenerateSigningKey(jwtkeys.ES256)
		if err != nil {
			b.Fatal(err)
		}
		pub, _, err := jwtkeys.PublicKeyPEM(priv)
		if err != nil {
			b.Fatal(err)
		}
		files[jwtkeys.SigningKeyName], files[jwtkeys.VerificationKeysName] = priv, pub
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(p.dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// serve projects leaf as the server's key pair, as the kubelet does.
func (p *scalePKI) serve(b *testing.B, leaf *hotcerttest.Leaf) {
	b.Helper()
	if _, err := p.tls.Write(map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM}); err != nil {
		b.Fatal(err)
	}
}

// trust projects the client CA bundle (cas), as the kubelet does.
func (p *scalePKI) trust(b *testing.B, cas ...*hotcerttest.CA) {
	b.Helper()
	if _, err := p.cas.Write(map[string][]byte{"ca.crt": hotcerttest.BundlePEM(cas...)}); err != nil {
		b.Fatal(err)
	}
}

// clientCreds are the agents' transport credentials: grpccreds.NewClient over the
// agent certificate and the CA, verifying the server as "localhost".
func (p *scalePKI) clientCreds(b *testing.B) credentials.TransportCredentials {
	b.Helper()
	return p.clientCredsFor(b, p.cliLeaf)
}

// clientCredsFor are clientCreds presenting leaf.
func (p *scalePKI) clientCredsFor(b *testing.B, leaf *hotcerttest.Leaf) credentials.TransportCredentials {
	b.Helper()
	return grpccreds.NewClient(hotcert.NewStore(p.clientMaterial(b, leaf)), tlsconfig.WithServerName("localhost"))
}

// clientMaterial is an agent's material: leaf and the CA that issued the server's
// certificate.
func (p *scalePKI) clientMaterial(b *testing.B, leaf *hotcerttest.Leaf) *hotcert.Material {
	b.Helper()
	m, err := hotcert.Validate(hotcert.Content{
		Cert: hotcert.Input{Name: "client.crt", Data: leaf.ChainPEM},
		Key:  hotcert.Input{Name: "client.key", Data: leaf.KeyPEM},
		CA:   hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(p.ca)},
	})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// scaleServer is a server process started by startScaleServer.
type scaleServer struct {
	kind   string
	addr   string
	before processSample
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	lines  *bufio.Scanner
	cancel context.CancelFunc
}

// startScaleServer runs scaleServerProcess (this test binary, see TestMain) as a child process serving kind with
// pki, for n agents; env adds settings (HOTCERT_SCALE_WINDOW, HOTCERT_SCALE_ADDR).
func startScaleServer(b *testing.B, pki *scalePKI, kind string, n int, env ...string) *scaleServer {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(append(os.Environ(), scaleEnvServer+"="+kind, scaleEnvDir+"="+pki.dir, scaleEnvN+"="+strconv.Itoa(n)), env...)
	cmd.Stderr = os.Stderr
	s := &scaleServer{kind: kind, cmd: cmd, cancel: cancel}
	var err error
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	s.stdout, s.lines = stdout, bufio.NewScanner(stdout)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready := strings.Fields(s.next(b)) // "ready ADDR BEFORE-JSON"
	if len(ready) != 3 || ready[0] != "ready" {
		b.Fatalf("%s server process: unexpected line %q", kind, ready)
	}
	s.addr = ready[1]
	if err := json.Unmarshal([]byte(ready[2]), &s.before); err != nil {
		b.Fatal(err)
	}
	return s
}

func (s *scaleServer) next(b *testing.B) string {
	for s.lines.Scan() {
		if l, ok := strings.CutPrefix(s.lines.Text(), scaleLine); ok {
			return l
		}
	}
	b.Fatalf("%s server process ended early: %v", s.kind, s.lines.Err())
	return ""
}

// measure asks the server process for a sample of itself.
func (s *scaleServer) measure(b *testing.B) processSample {
	b.Helper()
	var after processSample
	if err := json.Unmarshal([]byte(s.ask(b, "measure", "after")), &after); err != nil {
		b.Fatal(err)
	}
	return after
}

// ask sends the server process the command line cmd and returns the rest of its
// answer, the line that starts with the word answer.
func (s *scaleServer) ask(b *testing.B, cmd, answer string) string {
	b.Helper()
	if _, err := io.WriteString(s.stdin, cmd+"\n"); err != nil {
		b.Fatal(err)
	}
	l := s.next(b)
	if l == answer {
		return ""
	}
	rest, ok := strings.CutPrefix(l, answer+" ")
	if !ok {
		b.Fatalf("%s server process: %q answered %q, want %q", s.kind, cmd, l, answer)
	}
	return rest
}

// stop closes the server process's stdin (it stops its server and exits) and waits.
func (s *scaleServer) stop(b *testing.B) {
	s.stdin.Close()
	go io.Copy(io.Discard, s.stdout)
	if err := s.cmd.Wait(); err != nil {
		b.Errorf("%s server process: %v", s.kind, err)
	}
	s.cancel()
}

// scaleAgent opens one agent's connection and stream and returns once its first
// heartbeat was acknowledged. The stream then stays open until ctx ends.
func scaleAgent(ctx context.Context, addr string, creds credentials.TransportCredentials, id, token string) (*grpc.ClientConn, grpc.ClientStream, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithReadBufferSize(4 << 10), grpc.WithWriteBufferSize(4 << 10)}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(jwtgrpc.NewPerRPCCredentials(jwtkeys.StaticToken(token))))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, nil, err
	}
	st, err := cc.NewStream(ctx, &agentrpc.StreamDesc, agentrpc.ConnectMethod)
	if err != nil {
		return cc, nil, err
	}
	if err := agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeRegister, AgentID: id}); err != nil {
		return cc, nil, err
	}
	if m, err := agentrpc.Recv(st); err != nil || m.Type != agentrpc.TypeRegistered {
		return cc, nil, fmt.Errorf("%s: register: %v (got %q)", id, err, m.Type)
	}
	if err := scaleHeartbeat(st, 1); err != nil {
		return cc, nil, fmt.Errorf("%s: %w", id, err)
	}
	return cc, st, nil
}

// scaleHeartbeat sends heartbeat seq on st and waits for its acknowledgement.
func scaleHeartbeat(st grpc.ClientStream, seq uint64) error {
	if err := agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeHeartbeat, Seq: seq}); err != nil {
		return fmt.Errorf("heartbeat %d: %w", seq, err)
	}
	if m, err := agentrpc.Recv(st); err != nil || m.Type != agentrpc.TypeHeartbeatAck || m.Seq != seq {
		return fmt.Errorf("heartbeat %d: %v (got %q %d)", seq, err, m.Type, m.Seq)
	}
	return nil
}

// failer is what the server process and the samplers need of a test: a
// *testing.B in the benchmark, exitOnFailure in the server process.
type failer interface {
	Helper()
	Fatal(args ...any)
	Error(args ...any)
}

// exitOnFailure reports the server process's failures on stderr and in its exit
// status, where the benchmark sees them.
type exitOnFailure struct{ failed bool }

func (*exitOnFailure) Helper() {}

func (*exitOnFailure) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}

func (f *exitOnFailure) Error(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	f.failed = true
}

// TestMain runs the package's tests, or, in the child process that
// BenchmarkScaleAgents starts (scaleEnvServer set), that benchmark's server.
func TestMain(m *testing.M) {
	if os.Getenv(scaleEnvServer) != "" {
		var f exitOnFailure
		scaleServerProcess(&f)
		if f.failed {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// scaleServerProcess is BenchmarkScaleAgents' server process. It serves until its
// stdin closes, printing its address and a sample of itself when ready and another
// after "measure"; scaleExpiry's server answers its commands too (expiryCommand).
func scaleServerProcess(t failer) {
	kind, dir := os.Getenv(scaleEnvServer), os.Getenv(scaleEnvDir)
	n, err := strconv.Atoi(os.Getenv(scaleEnvN))
	if err != nil {
		t.Fatal(err)
	}
	if err := raiseNoFile(uint64(n) + 512); err != nil {
		t.Fatal(err)
	}
	path := func(name string) string { return filepath.Join(dir, name) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listen := os.Getenv(scaleEnvAddr)
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}

	var ks *jwtkeys.KeySet
	if kind != scalePlain {
		ks = scaleKeySet(ctx, t, dir, n)
		defer ks.Close()
	}
	serveDone := make(chan error, 1)
	var cp *controlplane.Server // the control plane kinds' server
	var clk *drainClock         // scaleExpiry's expiry clock
	switch kind {
	case scalePlain, scalePlainTokens:
		cert, err := tls.LoadX509KeyPair(path("tls/tls.crt"), path("tls/tls.key"))
		if err != nil {
			t.Fatal(err)
		}
		caPEM, err := os.ReadFile(path(scaleCAFile))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatal("ca.crt holds no certificate")
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
		opts := []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg)),
			grpc.ReadBufferSize(4 << 10), grpc.WriteBufferSize(4 << 10),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true})}
		if ks != nil {
			opts = append(opts, grpc.ChainStreamInterceptor(jwtgrpc.StreamServerInterceptor(ks)))
		}
		gs := grpc.NewServer(opts...)
		gs.RegisterService(agentrpc.ServiceDesc(plainHandler(ks)), nil)
		go func() { serveDone <- gs.Serve(ln) }()
		defer func() { gs.Stop(); <-serveDone }()
	default:
		tlsSrc, err := file.New(file.WithKeyPair(path("tls/tls.crt"), path("tls/tls.key")))
		if err != nil {
			t.Fatal(err)
		}
		caSrc, err := file.New(file.WithCA(path(scaleCAFile)))
		if err != nil {
			t.Fatal(err)
		}
		cfg := controlplane.Config{TLS: tlsSrc, ClientCA: caSrc, Tokens: ks, TokenTTL: 30 * time.Minute, ShutdownGrace: time.Second}
		if kind == scaleRevoke {
			if cfg.DenyList, err = revocation.Files(path("deny/deny.list"), ""); err != nil {
				t.Fatal(err)
			}
		}
		if kind == scaleDrain {
			cfg.DrainWindow, cfg.CutUntrusted = time.Minute, true
		}
		if kind == scaleExpiry {
			clk = &drainClock{FakeClock: hotcerttest.NewFakeClock(time.Now())}
			cfg.DrainWindow, cfg.DrainBeforeExpiry, cfg.ExpiryClock = time.Minute, scaleExpiryMargin, clk
		}
		if w := os.Getenv(scaleEnvWindow); w != "" && cfg.DrainWindow > 0 {
			if cfg.DrainWindow, err = time.ParseDuration(w); err != nil {
				t.Fatal(err)
			}
		}
		srv, err := controlplane.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cp = srv
		srvCtx, stop := context.WithCancel(ctx)
		go func() { serveDone <- srv.Serve(srvCtx, ln) }()
		defer func() {
			stop()
			if err := <-serveDone; err != nil {
				t.Error(err)
			}
		}()
	}

	before, err := json.Marshal(sampleProcess(t))
	if err != nil {
		t.Fatal(err)
	}
	prof := startScaleProfile(t, kind)
	fmt.Printf("%sready %s %s\n", scaleLine, ln.Addr(), before)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "measure":
			prof.stop(t)
			after, err := json.Marshal(sampleProcess(t))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("%safter %s\n", scaleLine, after)
		default:
			if answer, ok := expiryCommand(ctx, t, cp, clk, cmd, arg); ok {
				fmt.Printf("%s%s\n", scaleLine, answer)
			}
		}
	}
}

// scaleKeySet starts the server's token key set from dir and writes the tokens of
// agents 0..n-1, one a line, to dir/tokens for the benchmark. It runs until ctx ends.
func scaleKeySet(ctx context.Context, t failer, dir string, n int) *jwtkeys.KeySet {
	t.Helper()
	keySrc, err := jwtfile.New(jwtfile.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := jwtkeys.New(ctx, keySrc, jwtkeys.WithMaxTokenTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ks.Start(ctx) }()
	var tokens strings.Builder
	for i := range n {
		tok, err := ks.Issue(scaleAgentID(i), 30*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		tokens.WriteString(tok + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte(tokens.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return ks
}

func scaleAgentID(i int) string { return fmt.Sprintf("agent-%05d", i) }

// plainHandler serves the stream protocol without sessions or drain: registered
// for register, an ack for every heartbeat. With ks (plaintok) it does the control
// plane's token work too: the interceptor verified the stream's token, the handler
// checks its subject and signs a fresh token into the registered reply.
func plainHandler(ks *jwtkeys.KeySet) func(grpc.ServerStream) error {
	return func(st grpc.ServerStream) error {
		first, err := agentrpc.Recv(st)
		if err != nil {
			return err
		}
		reply := agentrpc.Message{Type: agentrpc.TypeRegistered, Replica: "plain"}
		if ks != nil {
			if c, ok := jwtgrpc.ClaimsFromContext(st.Context()); !ok || c.Subject != first.AgentID {
				return status.Error(codes.Unauthenticated, "token issued to another agent")
			}
			if reply.Token, err = ks.Issue(first.AgentID, 30*time.Minute); err != nil {
				return err
			}
		}
		if err := agentrpc.Send(st, reply); err != nil {
			return err
		}
		for {
			m, err := agentrpc.Recv(st)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if m.Type == agentrpc.TypeHeartbeat {
				if err := agentrpc.Send(st, agentrpc.Message{Type: agentrpc.TypeHeartbeatAck, Seq: m.Seq}); err != nil {
					return err
				}
			}
		}
	}
}

func sampleProcess(t failer) processSample {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return processSample{
		Heap:       ms.HeapInuse,
		Stack:      ms.StackInuse,
		RSS:        vmRSS(t),
		Goroutines: runtime.NumGoroutine(),
		CPU:        time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
	}
}

// vmRSS is the process's resident set size from /proc/self/status.
func vmRSS(t failer) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
