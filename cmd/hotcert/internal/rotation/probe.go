package rotation

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
	"github.com/hotcert/hotcert/cmd/hotcert/internal/inspect"
)

// cas are the CAs of one side of the rotation.
type cas struct {
	name string          // for sentences: the first CA's common name, else its subject
	fps  map[string]bool // lower-case hex fingerprints
	m    *hotcert.Material
}

func loadCAs(ctx context.Context, path string) (cas, error) {
	m, err := inspect.LoadBundle(ctx, path)
	if err != nil {
		return cas{}, fmt.Errorf("rotation: %s: %w", path, err)
	}
	c := cas{fps: map[string]bool{}, m: m}
	for i, ca := range m.TrustCertificates() {
		c.fps[m.TrustFingerprints()[i].String()] = true
		if i == 0 {
			c.name = ca.Subject.CommonName
			if c.name == "" {
				c.name = ca.Subject.String()
			}
		}
	}
	return c, nil
}

// union is one bundle holding the CAs of both sides, so one handshake per replica
// tells which side issued what it serves.
func union(oldCAs, newCAs cas) (*hotcert.Material, error) {
	var pemData []byte
	for _, m := range []*hotcert.Material{oldCAs.m, newCAs.m} {
		pemData = append(pemData, hotcert.EncodeCertificates(m.TrustCertificates()...)...)
	}
	m, err := hotcert.Validate(hotcert.Content{CA: hotcert.Input{Name: "old and new CA", Data: pemData}}, hotcert.WithRequireTrust())
	if err != nil {
		return nil, fmt.Errorf("rotation: old and new CA: %w", err)
	}
	return m, nil
}

// probe looks at one replica: what it serves (a real handshake, as an agent does)
// and what its agents trust (its status endpoint).
func probe(ctx context.Context, o Options, r Replica, bundle *hotcert.Material, oldCAs, newCAs cas) ReplicaReport {
	rr := ReplicaReport{Name: r.Address, Address: r.Address, StatusURL: r.StatusURL}
	rep, err := inspect.Remote(ctx, inspect.RemoteOptions{Address: r.Address, ServerName: o.ServerName, Bundle: bundle, Timeout: o.Timeout})
	if err != nil {
		rr.ServeError = err.Error()
	} else {
		c := rep.Certificate
		rr.Serves = &ServedLeaf{SHA256: c.SHA256, Serial: c.Serial, Subject: c.Subject, Issuer: c.Issuer, NotAfter: c.NotAfter, HostnameOK: rep.Hostname.OK}
		fps := bundle.TrustFingerprints()
		for i, ca := range rep.Bundle.CAs {
			if !ca.Chain.OK {
				continue
			}
			fp := fps[i].String()
			rr.Serves.IssuedByOld = rr.Serves.IssuedByOld || oldCAs.fps[fp]
			rr.Serves.IssuedByNew = rr.Serves.IssuedByNew || newCAs.fps[fp]
		}
	}
	st, err := readStatus(ctx, o.HTTPClient, r.StatusURL)
	switch {
	case err != nil:
		rr.StatusError = err.Error()
	case st.Fleet == nil:
		rr.StatusError = "its status has no fleet view (a control plane of an older release)"
	default:
		rr.fleet = st.Fleet
		rr.Agents, rr.Departed = st.Fleet.Agents, st.Fleet.Departed
	}
	if st != nil && st.Replica != "" {
		rr.Name = st.Replica
	}
	return rr
}

// replicaStatus is the part of the control plane's status the rotation reads.
type replicaStatus struct {
	Replica string          `json:"replica"`
	Fleet   *agentrpc.Fleet `json:"fleet"`
	// DenyList is the replica's deny-list status (none without a deny list).
	DenyList *agentrpc.DenyListStatus `json:"deny_list"`
}

func readStatus(ctx context.Context, hc *http.Client, u string) (*replicaStatus, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("status %s: %w", u, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("status %s: %w", u, err)
	}
	// 503 still carries the status (an expired served certificate): read it.
	st := new(replicaStatus)
	if err := json.Unmarshal(body, st); err != nil {
		return nil, fmt.Errorf("status %s: HTTP %d, not a control plane status: %w", u, resp.StatusCode, err)
	}
	return st, nil
}
