package mirroring

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotcert/hotcert/hotcerttest"
)

// /healthz judges the directory's validity window by the clock: 200 while what
// the directory holds is valid, 503 before its NotBefore and once it expired,
// with "healthy" saying the same in the JSON.
func TestHealthFollowsTheValidityOfTheMirroredMaterial(t *testing.T) {
	start := time.Now().Truncate(time.Second)
	ca := hotcerttest.MustNewCA()
	leaf := ca.MustIssue(hotcerttest.WithValidity(start.Add(-time.Hour), start.Add(time.Hour)))
	in := t.TempDir()
	for name, data := range map[string][]byte{"tls.crt": leaf.ChainPEM, "tls.key": leaf.KeyPEM} {
		if err := os.WriteFile(filepath.Join(in, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := start
	ctx := context.Background()
	p, err := New(ctx, Config{
		CertFile: filepath.Join(in, "tls.crt"), KeyFile: filepath.Join(in, "tls.key"), Dir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: prometheus.NewRegistry(),
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	health := func() (int, Status) {
		t.Helper()
		rec := httptest.NewRecorder()
		p.HealthHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var st Status
		if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
			t.Fatalf("/healthz: %v: %s", err, rec.Body)
		}
		return rec.Code, st
	}
	for _, tc := range []struct {
		at   time.Time
		want int
	}{
		{start, http.StatusOK},
		{start.Add(time.Hour), http.StatusOK}, // NotAfter is inclusive, as validation has it
		{start.Add(time.Hour + time.Second), http.StatusServiceUnavailable},
		{start.Add(2 * time.Hour), http.StatusServiceUnavailable},
		{start.Add(-time.Hour - time.Second), http.StatusServiceUnavailable}, // not yet valid
	} {
		now = tc.at
		code, st := health()
		if code != tc.want || st.Healthy != (tc.want == http.StatusOK) {
			t.Errorf("at NotAfter%+v: /healthz %d (healthy %v), want %d", tc.at.Sub(leaf.Cert.NotAfter), code, st.Healthy, tc.want)
		}
		if !st.Mirror.NotAfter.Equal(leaf.Cert.NotAfter) || st.Mirror.Generation != 1 {
			t.Errorf("/healthz says the directory holds generation %d until %v, want 1 until %v", st.Mirror.Generation, st.Mirror.NotAfter, leaf.Cert.NotAfter)
		}
	}
}
