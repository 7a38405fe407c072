package hotcert_test

import (
	"context"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// TestTrustOnlyReloaderSaysItLoadedABundle: a reloader of a CA bundle alone
// logs "TLS CA bundle loaded" / "reloaded", never that it loaded a certificate;
// one with a leaf keeps the certificate lines, and WithLogMessages still wins.
func TestTrustOnlyReloaderSaysItLoadedABundle(t *testing.T) {
	ca, next := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	bundle := func(cas ...*hotcerttest.CA) hotcert.Content {
		return hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(cas...)}}
	}

	h := startReloader(t, bundle(ca))
	h.src.Set(bundle(ca, next), nil)
	if err := h.r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the reload line", func() bool { return h.logs.Count("TLS CA bundle reloaded") == 1 })
	if h.logs.Count("TLS CA bundle loaded") != 1 || h.logs.Count("TLS certificate loaded") != 0 || h.logs.Count("TLS certificate reloaded") != 0 {
		t.Fatalf("a CA bundle logged as a certificate:\n%s", h.logs)
	}

	leaf := startReloader(t, identity(ca.MustIssue()))
	if leaf.logs.Count("TLS certificate loaded") != 1 || leaf.logs.Count("TLS CA bundle loaded") != 0 {
		t.Fatalf("a key pair's first line:\n%s", leaf.logs)
	}

	own := startReloader(t, bundle(ca), hotcert.WithLogMessages("agent TLS CA bundle loaded", "", ""))
	if own.logs.Count("agent TLS CA bundle loaded") != 1 || own.logs.Count("TLS CA bundle loaded") != 0 {
		t.Fatalf("WithLogMessages lost:\n%s", own.logs)
	}
}
