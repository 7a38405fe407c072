package evidence

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/hotcert/hotcert/rollout/internal/census"
)

// TestDenyListsPairSeriesByComponent: one query; a component's version and
// its open denied connections are paired by every label but the name and
// version, whatever the component label is called; a component that does not
// report its connections says -1; targets that are not pods are left out.
func TestDenyListsPairSeriesByComponent(t *testing.T) {
	var queries []string
	type sample struct {
		m map[string]string
		v string
	}
	result := []sample{
		{map[string]string{"__name__": "dexaflow_tls_deny_list_info", "namespace": "a", "pod": "p", "container": "cp", "listener": "agent_grpc", "version": "v3"}, "1"},
		{map[string]string{"__name__": "dexaflow_tls_deny_list_denied_connections", "namespace": "a", "pod": "p", "container": "cp", "listener": "agent_grpc"}, "2"},
		{map[string]string{"__name__": "dexaflow_tls_deny_list_info", "namespace": "a", "pod": "p", "container": "cp", "listener": "admin", "version": "v2"}, "1"},
		{map[string]string{"__name__": "dexaflow_tls_deny_list_info", "namespace": "a", "pod": "q", "component": "api", "version": "v3"}, "1"},
		{map[string]string{"__name__": "dexaflow_tls_deny_list_denied_connections", "namespace": "a", "pod": "q", "component": "api"}, "0"},
		{map[string]string{"__name__": "dexaflow_tls_deny_list_info", "job": "node", "version": "v1"}, "1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.FormValue("query"))
		var res []map[string]any
		for _, s := range result {
			res = append(res, map[string]any{"metric": s.m, "value": []any{1.7e9, s.v}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": res}})
	}))
	defer srv.Close()
	p := Prometheus{URL: srv.URL, Client: srv.Client(), Prefix: "dexaflow"}
	got, err := p.DenyLists(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(queries) != 1 || queries[0] != `{__name__=~"dexaflow_tls_deny_list_info|dexaflow_tls_deny_list_denied_connections"}` {
		t.Fatalf("queries %q", queries)
	}
	if len(got) != 2 || len(got["a/p"]) != 2 {
		t.Fatalf("reports %+v", got)
	}
	byVersion := map[string]census.DenyReport{}
	for _, d := range got["a/p"] {
		byVersion[d.Version] = d
	}
	if d := byVersion["v3"]; d.Container != "cp" || d.Denied != 2 {
		t.Errorf("a/p agent_grpc: %+v", d)
	}
	if d := byVersion["v2"]; d.Container != "cp" || d.Denied != -1 {
		t.Errorf("a/p admin: %+v", d)
	}
	if want := []census.DenyReport{{Component: "api", Version: "v3", Denied: 0}}; !reflect.DeepEqual(got["a/q"], want) {
		t.Errorf("a/q: %+v, want %+v", got["a/q"], want)
	}
}
