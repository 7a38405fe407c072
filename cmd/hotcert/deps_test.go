package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinaryLinksNoKubernetes keeps `go run ./cmd/hotcert demo` quick to build
// and the binary small: the hotcert CLI links no Kubernetes client or
// controller-runtime (the rollout controller is the hotcert-controller binary).
func TestBinaryLinksNoKubernetes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/hotcert/hotcert/cmd/hotcert").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !strings.Contains(string(out), "github.com/hotcert/hotcert/tlsconfig") {
		t.Fatalf("go list -deps listed %d packages, not hotcert's: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") {
			t.Errorf("the hotcert binary links %s", p)
		}
	}
}
