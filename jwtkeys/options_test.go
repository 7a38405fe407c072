package jwtkeys

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
	"github.com/hotcert/hotcert/internal/testutil"
)

// tlsSource is a fixed TLS source, for configuring a hotcert.Reloader next to a KeySet.
type tlsSource struct{ c hotcert.Content }

func (s tlsSource) Read(context.Context) (hotcert.Content, error) { return s.c, nil }
func (tlsSource) Watch(ctx context.Context, _ func()) error       { <-ctx.Done(); return nil }
func (tlsSource) String() string                                  { return "fixed" }

// TestOneOptionListConfiguresBothReloaders gives the same reload options to a TLS
// Reloader and a KeySet: both log under the one component with the one extra
// attribute under the one log key, through the one logger.
func TestOneOptionListConfiguresBothReloaders(t *testing.T) {
	logs := &testutil.LogBuffer{}
	shared := []hotcert.ReloadOption{
		hotcert.WithComponent("agent_grpc"), hotcert.WithComponentLabel("listener"),
		hotcert.WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		hotcert.WithLogAttrs("replica", "r1"),
		hotcert.WithSettle(0), hotcert.WithPollInterval(0), hotcert.WithInitialWait(0),
	}
	var tlsOpts []hotcert.Option
	var keyOpts []Option
	for _, o := range shared {
		tlsOpts = append(tlsOpts, o)
		keyOpts = append(keyOpts, o)
	}
	ca := hotcerttest.MustNewCA()
	r, err := hotcert.New(context.Background(), tlsSource{hotcert.Content{CA: hotcert.Input{Name: "ca.crt", Data: hotcerttest.BundlePEM(ca)}}}, tlsOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ks, err := New(context.Background(), NewMemorySource(signing(newKey(t, ES256, 0))), keyOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want one load line from each reloader, got:\n%s", logs)
	}
	for _, l := range lines {
		if !strings.Contains(l, "listener=agent_grpc") || !strings.Contains(l, "replica=r1") || strings.Contains(l, "component=") {
			t.Errorf("line lacks the shared component or attribute: %s", l)
		}
	}

	// An empty component keeps each reloader's default, for both alike.
	ks2, err := New(context.Background(), NewMemorySource(signing(newKey(t, ES256, 0))), hotcert.WithComponent(""))
	if err != nil {
		t.Fatal(err)
	}
	defer ks2.Close()
	if ks2.cfg.reload.Component != DefaultComponent {
		t.Errorf("component %q, want the default", ks2.cfg.reload.Component)
	}
}
