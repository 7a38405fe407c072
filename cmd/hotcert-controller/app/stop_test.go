package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// TestCleanStop: a stop (SIGTERM) logs no error and releases the Lease, so a
// second replica takes it at once: its Lease lasts ten minutes, far beyond
// the test's wait, and only a released Lease can be acquired before then.
func TestCleanStop(t *testing.T) {
	t.Parallel()
	ns := env.NewNamespace(t)
	kubeconfig := writeKubeconfig(t, "")
	args := []string{"--kubeconfig", kubeconfig, "--namespace", ns,
		"--leader-election-namespace", ns, "--leader-election-id", "clean-stop",
		"--leader-election-lease-duration=10m", "--leader-election-renew-deadline=2s", "--leader-election-retry-period=200ms",
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}
	createSecret(t, ns, "s", "1")
	createDeployment(t, ns, "app")
	first, _, stop := startStoppable(t, args...)
	holder := func() string {
		l, err := env.Clientset().CoordinationV1().Leases(ns).Get(context.Background(), "clean-stop", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	waitFor(t, "the first replica to lead", func() bool { return holder() != "" })
	waitAdopted(t, ns, "app") // running, caches synced: the stop of a working controller
	leader := holder()
	stop()
	if strings.Contains(first.String(), "level=ERROR") {
		t.Errorf("a clean stop logged an error:\n%s", first)
	}
	if !strings.Contains(first.String(), releasedMsg) {
		t.Errorf("the stop does not say the Lease is released:\n%s", first)
	}
	if h := holder(); h != "" {
		t.Errorf("after the stop the Lease is held by %q, want released", h)
	}

	start(t, args...)
	waitFor(t, "a second replica to lead before the old Lease would have expired", func() bool {
		h := holder()
		return h != "" && h != leader
	})
}

// TestUnreachableAPIServer: a kubeconfig pointing where nothing listens fails
// first with where the API server was expected and which context said so, once
// prefixed (the binary adds its name).
func TestUnreachableAPIServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg, err := clientcmd.Load(env.KubeConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	cfg.Contexts["nowhere"] = cfg.Contexts[cfg.CurrentContext]
	cfg.CurrentContext = "nowhere"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	cmd := NewCommand(io.Discard, &stderr)
	cmd.SetArgs([]string{"--kubeconfig", path, "--metrics-bind-address=0", "--health-probe-bind-address=0", fmt.Sprintf("--metrics-prefix=hotcert_app%d", runs.Add(1))})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	want := fmt.Sprintf(`the API server at https://%s (kubeconfig context "nowhere") cannot be reached: `, addr)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error %v, want it to start with %q", err, want)
	}
	if strings.Contains(err.Error(), "hotcert-controller:") || strings.Contains(err.Error(), "namespaced") {
		t.Errorf("error %q: the binary's name is main's prefix, and the manager's discovery failure comes after", err)
	}
}
