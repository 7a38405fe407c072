package rotation

import (
	"strings"
	"testing"
)

// kubectl get endpointslices -l kubernetes.io/service-name=control-plane -o json,
// trimmed: two slices of one Service (IPv4 and IPv6), a not-ready pod, a pod in both.
const endpointSlicesJSON = `{
  "apiVersion": "v1", "kind": "List",
  "items": [
    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
     "metadata": {"name": "control-plane-abcde", "labels": {"kubernetes.io/service-name": "control-plane"}},
     "ports": [{"name": "metrics", "port": 9090, "protocol": "TCP"}, {"name": "grpc", "port": 9091, "protocol": "TCP"}],
     "endpoints": [
       {"addresses": ["10.0.0.7"], "conditions": {"ready": true, "serving": true}, "targetRef": {"kind": "Pod", "name": "cp-0"}},
       {"addresses": ["10.0.0.8"], "conditions": {"ready": false, "serving": false, "terminating": true}},
       {"addresses": ["10.0.0.9"]}
     ]},
    {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv6",
     "ports": [{"name": "grpc", "port": 9091}],
     "endpoints": [{"addresses": ["fd00::7"], "conditions": {"ready": true}}]}
  ]
}`

func TestAddressesFromEndpointSlices(t *testing.T) {
	got, err := AddressesFromEndpointSlices(strings.NewReader(endpointSlicesJSON), "grpc")
	if want := "10.0.0.7:9091 10.0.0.9:9091 [fd00::7]:9091"; err != nil || strings.Join(got, " ") != want {
		t.Fatalf("got %v, %v; want %s (ready endpoints only, the grpc port)", got, err, want)
	}
	one := `{"kind": "EndpointSlice", "ports": [{"port": 9091}], "endpoints": [{"addresses": ["10.0.0.7"]}]}`
	if got, err := AddressesFromEndpointSlices(strings.NewReader(one), ""); err != nil || len(got) != 1 || got[0] != "10.0.0.7:9091" {
		t.Fatalf("one slice, its only port: %v, %v", got, err)
	}
	for input, want := range map[string]string{
		endpointSlicesJSON:              `2 ports ("metrics" "grpc"): name the gRPC one with --port-name`,
		`{"kind": "List", "items": []}`: "no ready endpoint",
		`Error from server (NotFound)`:  "not the JSON of kubectl get endpointslices -o json",
	} {
		if _, err := AddressesFromEndpointSlices(strings.NewReader(input), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.30s…: error %v, want %q", input, err, want)
		}
	}
	if _, err := AddressesFromEndpointSlices(strings.NewReader(endpointSlicesJSON), "https"); err == nil || !strings.Contains(err.Error(), `no port named "https"`) {
		t.Errorf("a port name the slices lack: %v", err)
	}
}
