package evidence

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestHandshakeFailuresCountsSinceTheWrite: one query, the increase since
// the given time of the agent's and control plane's failure counters of the
// given reasons, by pod and reason, with the rotation's labels; a pod that
// counted none, a counter that went back (a restarted process) and a series
// that names no pod count nothing.
func TestHandshakeFailuresCountsSinceTheWrite(t *testing.T) {
	var queries []string
	result := []struct {
		labels map[string]string
		value  string
	}{
		{map[string]string{"ns": "a", "po": "agent", "reason": "unknown_authority"}, "4"},
		{map[string]string{"ns": "a", "po": "cp", "reason": "peer_rejected"}, "2.0000001"},
		{map[string]string{"ns": "a", "po": "quiet", "reason": "unknown_authority"}, "0"},
		{map[string]string{"ns": "a", "po": "restarted", "reason": "unknown_authority"}, "-7"},
		{map[string]string{"reason": "unknown_authority"}, "3"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.FormValue("query"))
		var res []map[string]any
		for _, s := range result {
			res = append(res, map[string]any{"metric": s.labels, "value": []any{1.7e9, s.value}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	defer srv.Close()
	p := Prometheus{URL: srv.URL, Client: srv.Client(), NamespaceLabel: "ns", PodLabel: "po", Prefix: "dexaflow"}
	since := time.Date(2026, 3, 1, 12, 0, 0, 500e6, time.UTC)
	got, err := p.HandshakeFailures(context.Background(), since, []string{"unknown_authority", "peer_rejected"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Failure{{Pod: "a/agent", Reason: "unknown_authority", Count: 4}, {Pod: "a/cp", Reason: "peer_rejected", Count: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("failures %+v, want %+v", got, want)
	}
	sel := `{__name__=~"dexaflow_(agent_|controlplane_)?tls_handshake_failures_total",reason=~"unknown_authority|peer_rejected"}`
	wantQ := "(sum by (ns, po, reason) (" + sel + ") - sum by (ns, po, reason) (" + sel + " @ 1772366400.500)) or sum by (ns, po, reason) (" + sel + ")"
	if len(queries) != 1 || queries[0] != wantQ {
		t.Fatalf("queries\n  %q\nwant\n  %q", queries, wantQ)
	}

	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	if _, err := (Prometheus{URL: down.URL}).HandshakeFailures(context.Background(), since, []string{"x"}); err == nil || !strings.Contains(err.Error(), "evidence: Prometheus query") {
		t.Fatalf("a Prometheus that does not answer: %v", err)
	}
}
