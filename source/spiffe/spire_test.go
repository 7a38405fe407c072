package spiffe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A real SPIRE server and agent, built from the Go module proxy by
// hack/build-spire.sh (make test builds them first), run with join-token node
// attestation and a unix-socket Workload API in a temporary directory.

const (
	spireTrustDomain = "example.org"
	spireHostID      = "spiffe://example.org/host"
	spireWorkloadID  = "spiffe://example.org/workload"
	// spireSVIDTTL is the workload SVID's lifetime. SPIRE backdates NotBefore by
	// 10s and the agent renews at half the lifetime, so a 20s TTL rotates the
	// SVID about every 5s: the test sees real rotations without waiting long.
	spireSVIDTTL = 20
)

// spireBinDir returns where hack/build-spire.sh put the binaries:
// HOTCERT_SPIRE_BIN, or .bin/spire at the root of the repository.
func spireBinDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("HOTCERT_SPIRE_BIN"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return filepath.Join(dir, ".bin", "spire")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (go.work) to locate .bin/spire; set HOTCERT_SPIRE_BIN")
		}
		dir = parent
	}
}

type spire struct {
	t                     *testing.T
	bin, dir              string
	serverSock, agentSock string
	port                  int
	server, agent         *spireProc
}

// startSPIRE starts a SPIRE server and an agent attested with a join token as
// spiffe://example.org/host. No workload is registered yet (registerWorkload).
func startSPIRE(t *testing.T) *spire {
	t.Helper()
	bin := spireBinDir(t)
	for _, b := range []string{"spire-server", "spire-agent"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("SPIRE binary missing (%v): run `make spire-bins` (hack/build-spire.sh .bin/spire) first", err)
		}
	}
	// Unix socket paths are limited to 108 bytes: keep the directory short.
	dir, err := os.MkdirTemp("", "spire")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s := &spire{t: t, bin: bin, dir: dir, port: freePort(t),
		serverSock: filepath.Join(dir, "server.sock"), agentSock: filepath.Join(dir, "agent.sock")}

	s.write("server.conf", fmt.Sprintf(`
server {
	bind_address = "127.0.0.1"
	bind_port = "%d"
	socket_path = %q
	trust_domain = %q
	data_dir = %q
	log_level = "DEBUG"
	ca_ttl = "24h"
	default_x509_svid_ttl = "1h"
}
plugins {
	DataStore "sql" {
		plugin_data {
			database_type = "sqlite3"
			connection_string = %q
		}
	}
	NodeAttestor "join_token" {
		plugin_data {}
	}
	KeyManager "memory" {
		plugin_data {}
	}
}
`, s.port, s.serverSock, spireTrustDomain, filepath.Join(dir, "server-data"), filepath.Join(dir, "server-data", "datastore.sqlite3")))
	// The agent keeps its own SVID and key on disk, so a restarted agent comes back
	// without a new join token (tokens are single-use). It syncs with the server
	// every second, so it renews workload SVIDs at their half-life, not 5s later.
	s.write("agent.conf", fmt.Sprintf(`
agent {
	data_dir = %q
	log_level = "DEBUG"
	server_address = "127.0.0.1"
	server_port = "%d"
	socket_path = %q
	trust_domain = %q
	insecure_bootstrap = true
	experimental {
		sync_interval = "1s"
	}
}
plugins {
	NodeAttestor "join_token" {
		plugin_data {}
	}
	KeyManager "disk" {
		plugin_data {
			directory = %q
		}
	}
	WorkloadAttestor "unix" {
		plugin_data {}
	}
}
`, filepath.Join(dir, "agent-data"), s.port, s.agentSock, spireTrustDomain, filepath.Join(dir, "agent-data")))

	s.server = s.start("spire-server", "run", "-config", filepath.Join(dir, "server.conf"))
	s.waitHealthy("spire-server", "-socketPath", s.serverSock)

	out := s.run("spire-server", "token", "generate", "-socketPath", s.serverSock, "-spiffeID", spireHostID, "-ttl", "600")
	token, ok := strings.CutPrefix(strings.TrimSpace(out), "Token: ")
	if !ok || token == "" {
		t.Fatalf("spire-server token generate printed %q", out)
	}
	s.startAgent("-joinToken", token)
	return s
}

// registerWorkload registers this process (by its uid) as the workload
// spiffe://example.org/workload, with DNS name localhost and a short SVID TTL.
func (s *spire) registerWorkload() {
	s.t.Helper()
	s.run("spire-server", "entry", "create", "-socketPath", s.serverSock,
		"-parentID", spireHostID, "-spiffeID", spireWorkloadID,
		"-selector", fmt.Sprintf("unix:uid:%d", os.Getuid()),
		"-dns", "localhost", "-x509SVIDTTL", fmt.Sprint(spireSVIDTTL))
}

// startAgent starts the agent and waits until its Workload API answers.
func (s *spire) startAgent(extra ...string) {
	s.t.Helper()
	s.agent = s.start("spire-agent", append([]string{"run", "-config", filepath.Join(s.dir, "agent.conf")}, extra...)...)
	s.waitHealthy("spire-agent", "-socketPath", s.agentSock)
}

// stopAgent stops the agent (SIGTERM, as a rolling restart does) and waits until
// it has exited.
func (s *spire) stopAgent() {
	s.t.Helper()
	s.agent.stop(s.t)
}

func (s *spire) write(name, content string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// run runs a SPIRE command to completion and returns its standard output.
func (s *spire) run(bin string, args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, bin), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("%s %s: %v\n%s%s", bin, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// waitHealthy runs "bin healthcheck" until it succeeds (SPIRE's own readiness
// check), failing after a minute: the first start on a busy machine is slow.
func (s *spire) waitHealthy(bin string, args ...string) {
	s.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		cmd := exec.Command(filepath.Join(s.bin, bin), append([]string{"healthcheck"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s did not become healthy: %v: %s\nserver log:\n%s\nagent log:\n%s", bin, err, out, s.server.log(), s.agent.log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// spireProc is a running SPIRE daemon; its output goes to a log file in the
// test's directory, shown when the test fails.
type spireProc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

func (s *spire) start(bin string, args ...string) *spireProc {
	s.t.Helper()
	logPath := filepath.Join(s.dir, fmt.Sprintf("%s-%d.log", bin, time.Now().UnixNano()))
	logFile, err := os.Create(logPath)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(s.bin, bin), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", bin, err)
	}
	p := &spireProc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	s.t.Cleanup(func() {
		p.stop(s.t)
		if s.t.Failed() {
			s.t.Logf("%s log:\n%s", bin, p.log())
		}
	})
	return p
}

// stop sends SIGTERM and waits for the process to exit (SIGKILL after 30s).
func (p *spireProc) stop(t *testing.T) {
	select {
	case <-p.exited:
		return
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("stopping %s: %v", p.cmd.Path, err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *spireProc) log() string {
	if p == nil {
		return "(not started)"
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
