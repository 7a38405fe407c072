// Package spiretest runs a real SPIRE server and agent for tests: the binaries
// hack/build-spire.sh builds from the Go module proxy (make test builds them
// first), join-token node attestation, and a unix-socket Workload API in a
// temporary directory. It serves the tests of every module of the workspace that
// need a Workload API (source/spiffe, the hotcert CLI).
package spiretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotcert/hotcert/internal/testutil"
)

// The trust domain, the agent's and the workload's SPIFFE IDs.
const (
	TrustDomain = "example.org"
	HostID      = "spiffe://example.org/host"
	WorkloadID  = "spiffe://example.org/workload"
	// SVIDTTL is the workload SVID's lifetime. SPIRE backdates NotBefore by
	// 10s and the agent renews at half the lifetime, so a 20s TTL rotates the
	// SVID about every 5s: the test sees real rotations without waiting long.
	SVIDTTL = 20
)

// BinDir returns where hack/build-spire.sh put the binaries:
// HOTCERT_SPIRE_BIN, or .bin/spire at the root of the repository.
func BinDir(t testing.TB) string {
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

// SPIRE is a running SPIRE server and agent, stopped at the end of the test.
type SPIRE struct {
	// AgentSock is the path of the agent's Workload API socket (its address is
	// "unix://" + AgentSock).
	AgentSock string

	t             testing.TB
	bin, dir      string
	serverSock    string
	port          int
	server, agent *proc
}

// Start starts a SPIRE server and an agent attested with a join token as
// HostID. No workload is registered yet (RegisterWorkload).
func Start(t testing.TB) *SPIRE {
	t.Helper()
	bin := BinDir(t)
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
	s := &SPIRE{t: t, bin: bin, dir: dir, port: testutil.FreePort(t, "127.0.0.1"),
		serverSock: filepath.Join(dir, "server.sock"), AgentSock: filepath.Join(dir, "agent.sock")}

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
`, s.port, s.serverSock, TrustDomain, filepath.Join(dir, "server-data"), filepath.Join(dir, "server-data", "datastore.sqlite3")))
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
`, filepath.Join(dir, "agent-data"), s.port, s.AgentSock, TrustDomain, filepath.Join(dir, "agent-data")))

	s.server = s.start("spire-server", "run", "-config", filepath.Join(dir, "server.conf"))
	s.waitHealthy("spire-server", "-socketPath", s.serverSock)

	out := s.run("spire-server", "token", "generate", "-socketPath", s.serverSock, "-spiffeID", HostID, "-ttl", "600")
	token, ok := strings.CutPrefix(strings.TrimSpace(out), "Token: ")
	if !ok || token == "" {
		t.Fatalf("spire-server token generate printed %q", out)
	}
	s.startAgent("-joinToken", token)
	return s
}

// RegisterWorkload registers the processes of this uid (the test and the
// programs it starts) as the workload WorkloadID, with DNS name localhost and
// an SVID TTL of SVIDTTL seconds.
func (s *SPIRE) RegisterWorkload() {
	s.t.Helper()
	s.run("spire-server", "entry", "create", "-socketPath", s.serverSock,
		"-parentID", HostID, "-spiffeID", WorkloadID,
		"-selector", fmt.Sprintf("unix:uid:%d", os.Getuid()),
		"-dns", "localhost", "-x509SVIDTTL", fmt.Sprint(SVIDTTL))
}

// StartAgent starts the agent again after StopAgent (it keeps its own SVID on
// disk: no new join token) and waits until its Workload API answers.
func (s *SPIRE) StartAgent() { s.startAgent() }

func (s *SPIRE) startAgent(extra ...string) {
	s.t.Helper()
	s.agent = s.start("spire-agent", append([]string{"run", "-config", filepath.Join(s.dir, "agent.conf")}, extra...)...)
	s.waitHealthy("spire-agent", "-socketPath", s.AgentSock)
}

// StopAgent stops the agent (SIGTERM, as a rolling restart does) and waits until
// it has exited.
func (s *SPIRE) StopAgent() {
	s.t.Helper()
	s.agent.stop(s.t)
}

// AgentLog returns what the agent logged so far.
func (s *SPIRE) AgentLog() string { return s.agent.log() }

func (s *SPIRE) write(name, content string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// run runs a SPIRE command to completion and returns its standard output.
func (s *SPIRE) run(bin string, args ...string) string {
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
func (s *SPIRE) waitHealthy(bin string, args ...string) {
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

// proc is a running SPIRE daemon; its output goes to a log file in the
// test's directory, shown when the test fails.
type proc struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
}

func (s *SPIRE) start(bin string, args ...string) *proc {
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
	p := &proc{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
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
func (p *proc) stop(t testing.TB) {
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

func (p *proc) log() string {
	if p == nil {
		return "(not started)"
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
