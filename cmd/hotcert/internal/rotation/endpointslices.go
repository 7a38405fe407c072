package rotation

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
)

// The hotcert CLI links no Kubernetes client (it stays small and quick to build),
// so replicas are discovered from what kubectl prints: the discovery.k8s.io/v1
// EndpointSlices of the control plane's Service, as JSON. Only the few stable
// fields read here are declared.
type endpointSlice struct {
	Kind  string          `json:"kind"`
	Items []endpointSlice `json:"items"` // a List
	Ports []struct {
		Name *string `json:"name"`
		Port *int32  `json:"port"`
	} `json:"ports"`
	Endpoints []struct {
		Addresses  []string `json:"addresses"`
		Conditions struct {
			Ready *bool `json:"ready"` // unset means ready
		} `json:"conditions"`
	} `json:"endpoints"`
}

// AddressesFromEndpointSlices returns host:port of every ready endpoint in the
// EndpointSlices read from r (`kubectl get endpointslices -l
// kubernetes.io/service-name=NAME -o json`: a List, or one EndpointSlice), with the
// port named portName, or the slice's only port when portName is empty.
func AddressesFromEndpointSlices(r io.Reader, portName string) ([]string, error) {
	var doc endpointSlice
	if err := json.NewDecoder(r).Decode(&doc); err != nil {
		return nil, fmt.Errorf("rotation: EndpointSlices: not the JSON of kubectl get endpointslices -o json: %w", err)
	}
	list := doc.Items
	if doc.Kind == "EndpointSlice" {
		list = []endpointSlice{doc}
	}
	var out []string
	for _, s := range list {
		port, err := slicePort(s, portName)
		if err != nil {
			return nil, err
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if addr := net.JoinHostPort(a, strconv.Itoa(int(port))); !slices.Contains(out, addr) {
					out = append(out, addr)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("rotation: EndpointSlices: no ready endpoint (is the label selector the Service's?)")
	}
	return out, nil
}

// slicePort is the port of s named name, or its only port when name is empty.
func slicePort(s endpointSlice, name string) (int32, error) {
	var names []string
	for _, p := range s.Ports {
		n := ""
		if p.Name != nil {
			n = *p.Name
		}
		names = append(names, strconv.Quote(n))
		if p.Port != nil && (n == name || (name == "" && len(s.Ports) == 1)) {
			return *p.Port, nil
		}
	}
	if name == "" {
		return 0, fmt.Errorf("rotation: EndpointSlices: %d ports (%s): name the gRPC one with --port-name", len(s.Ports), strings.Join(names, " "))
	}
	return 0, fmt.Errorf("rotation: EndpointSlices: no port named %q (ports: %s)", name, strings.Join(names, " "))
}
