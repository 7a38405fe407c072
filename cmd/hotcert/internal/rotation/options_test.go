package rotation_test

import (
	"strings"
	"testing"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/rotation"
)

// TestReplicasFrom: status endpoints given per replica, in order, or derived from a
// port on each replica's host; anything else says what is missing.
func TestReplicasFrom(t *testing.T) {
	got, err := rotation.ReplicasFrom([]string{"10.0.0.7:9091", "[fd00::8]:9091"}, nil, "9090")
	if err != nil || len(got) != 2 || got[0].StatusURL != "http://10.0.0.7:9090/healthz" || got[1].StatusURL != "http://[fd00::8]:9090/healthz" {
		t.Fatalf("derived: %+v, %v", got, err)
	}
	got, err = rotation.ReplicasFrom([]string{"a:1", "b:1"}, []string{"http://a:2/healthz", "http://b:3/healthz"}, "")
	if err != nil || got[1].Address != "b:1" || got[1].StatusURL != "http://b:3/healthz" {
		t.Fatalf("paired: %+v, %v", got, err)
	}
	for _, c := range []struct {
		addrs, urls []string
		port, want  string
	}{
		{nil, nil, "9090", "--replica HOST:PORT"},
		{[]string{"a:1"}, nil, "", "--status-url per replica, or --status-port"},
		{[]string{"a:1"}, []string{"http://a:2"}, "9090", "not both"},
		{[]string{"a:1", "b:1"}, []string{"http://a:2"}, "", "2 --replica and 1 --status-url"},
		{[]string{"a"}, nil, "9090", `replica "a": want host:port`},
	} {
		if _, err := rotation.ReplicasFrom(c.addrs, c.urls, c.port); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReplicasFrom(%v, %v, %q): %v, want %q", c.addrs, c.urls, c.port, err, c.want)
		}
	}
}
