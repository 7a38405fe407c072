//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agent"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
	"github.com/hotcert/hotcert/hotcerttest"
)

// subPathChildEnv makes TestCheckWarnsOfSubPathMount the child that runs in
// a mount namespace of its own.
const subPathChildEnv = "HOTCERT_TEST_SUBPATH_CHILD"

// TestCheckWarnsOfSubPathMount: check says that a file bind-mounted in place,
// as the kubelet does for a subPath mount, will never be updated, in its text
// and in -o json, and says nothing of the same files read where they are. The
// bind mount is real: the test runs itself again in a new user and mount
// namespace (as unshare -rm does), so /proc/self/mountinfo is the kernel's.
// The agent logs the same of its CA bundle.
func TestCheckWarnsOfSubPathMount(t *testing.T) {
	if os.Getenv(subPathChildEnv) != "" {
		checkInMountNamespace(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckWarnsOfSubPathMount$", "-test.v")
	cmd.Env = append(os.Environ(), subPathChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the check in a mount namespace failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "subPath mount checked") {
		t.Fatalf("the child did not check anything:\n%s", out)
	}
}

func checkInMountNamespace(t *testing.T) {
	// Nothing mounted here reaches the parent's namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_PRIVATE|syscall.MS_REC, ""); err != nil {
		t.Fatalf("making the mounts private: %v", err)
	}
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue()
	volume := t.TempDir()
	crt := writeTemp(t, "tls.crt", leaf.ChainPEM)
	key := writeTemp(t, "tls.key", leaf.KeyPEM)
	// The container's view: an empty file the real one is bind-mounted on.
	mounted := filepath.Join(volume, "tls.crt")
	if err := os.WriteFile(mounted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(crt, mounted, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s: %v", mounted, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mounted, 0) })

	ctx := context.Background()
	out, _, err := run(ctx, "check", "--cert-file", mounted, "--key-file", key)
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if want := " " + mounted + " is a subPath mount: it will never be updated"; !strings.Contains(out, want) || !strings.Contains(out, "warning:") {
		t.Fatalf("no warning %q in:\n%s", want, out)
	}
	if strings.Contains(out, key+" is a subPath mount") {
		t.Fatalf("a file read where it is was taken for a subPath mount:\n%s", out)
	}
	out, _, err = run(ctx, "check", "--cert-file", mounted, "--key-file", key, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rep inspect.FilesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !rep.OK || len(rep.NeverUpdated) != 1 || rep.NeverUpdated[0] != mounted {
		t.Fatalf("json: ok %v, never_updated %q", rep.OK, rep.NeverUpdated)
	}
	out, _, err = run(ctx, "check", "--cert-file", crt, "--key-file", key, "-o", "json")
	if err != nil || strings.Contains(out, "never_updated") {
		t.Fatalf("the files where they are: %v\n%s", err, out)
	}
	agentLogsSubPathMount(t, volume, ca)
	t.Log("subPath mount checked")
}

// agentLogsSubPathMount: an agent whose CA bundle is a subPath mount says, in
// its own log, that the bundle will never be updated.
func agentLogsSubPathMount(t *testing.T, volume string, ca *hotcerttest.CA) {
	caFile := writeTemp(t, "ca.crt", ca.CertPEM)
	mounted := filepath.Join(volume, "ca.crt")
	if err := os.WriteFile(mounted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(caFile, mounted, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mounting %s: %v", mounted, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mounted, 0) })
	var log bytes.Buffer
	a, err := agent.New(agent.Config{Server: "127.0.0.1:1", CAFile: mounted,
		Logger: slog.New(slog.NewTextHandler(&log, nil)), Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if want := "file is a subPath mount and will never be updated"; !strings.Contains(log.String(), want) || !strings.Contains(log.String(), mounted) {
		t.Fatalf("the agent's log lacks %q for %s:\n%s", want, mounted, log.String())
	}
}
