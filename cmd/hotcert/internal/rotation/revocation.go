package rotation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hotcert/hotcert"
)

// RevocationReport answers "is serial X refused everywhere, and is no connection
// of it left?" from every replica's status (/healthz?revoked_serial=X): each
// replica says, of itself, whether the deny list it enforces revokes the serial
// and how many of its open connections (handshake-verified peer chains) present
// it. A replica that cannot be read, or enforces no deny list, proves nothing.
type RevocationReport struct {
	// Serial is the serial asked about, in openssl's format; Issuer the issuing
	// CA's SHA-256 when asked (lower-case hex; "": any issuer's serial).
	Serial   string              `json:"serial"`
	Issuer   string              `json:"issuer,omitempty"`
	Replicas []ReplicaRevocation `json:"replicas"`
	// RefusedEverywhere is true when every replica reports a deny list that revokes
	// Serial; ConnectionsLeft counts the open connections presenting it, over the
	// replicas that answered.
	RefusedEverywhere bool `json:"refused_everywhere"`
	ConnectionsLeft   int  `json:"connections_left"`
	// Done is RefusedEverywhere with no connection left.
	Done      bool      `json:"done"`
	Summary   string    `json:"summary"`
	CheckedAt time.Time `json:"checked_at"`
}

// ReplicaRevocation is what one replica reports of the serial.
type ReplicaRevocation struct {
	Name      string `json:"name"`
	StatusURL string `json:"status_url"`
	// Evidence is "reported" (the replica said it of itself) or "unknown" (its
	// status could not be read, or it enforces no deny list).
	Evidence string `json:"evidence"`
	// DenyListVersion is the version of the list it enforces.
	DenyListVersion string `json:"deny_list_version,omitempty"`
	// Revoked: its list revokes the serial (a serial entry or a CRL entry).
	Revoked bool `json:"revoked"`
	// Connections counts its open connections presenting the serial;
	// DeniedConnections those of any peer its list denies.
	Connections       int    `json:"connections"`
	DeniedConnections int    `json:"denied_connections"`
	StatusError       string `json:"status_error,omitempty"`
}

// CheckRevocation asks every replica of o about serial (hex, colons allowed),
// of issuer (the SHA-256 fingerprint of the issuing CA certificate, colons
// allowed) when not "": a serial is unique only per issuer, and a deny list
// revokes it per issuer, as the census asks it. Only o.Replicas' status URLs,
// o.Timeout and o.HTTPClient are used.
func CheckRevocation(ctx context.Context, o Options, serial, issuer string) (*RevocationReport, error) {
	n, ok := new(big.Int).SetString(strings.ReplaceAll(serial, ":", ""), 16)
	if !ok || serial == "" {
		return nil, fmt.Errorf("rotation: --revoked-serial %q: want a hex serial, as openssl x509 -serial prints it", serial)
	}
	if issuer != "" {
		fp, err := hotcert.ParseFingerprint(issuer)
		if err != nil {
			return nil, fmt.Errorf("rotation: --revoked-issuer: %w: want the SHA-256 fingerprint of the issuing CA certificate", err)
		}
		issuer = fp.String()
	}
	if len(o.Replicas) == 0 {
		return nil, errors.New("rotation: no replica given")
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: o.Timeout}
	}
	rep := &RevocationReport{Serial: hotcert.FormatSerial(n), Issuer: issuer, Replicas: make([]ReplicaRevocation, len(o.Replicas)), CheckedAt: time.Now().UTC()}
	var wg sync.WaitGroup
	for i, r := range o.Replicas {
		wg.Go(func() { rep.Replicas[i] = askRevocation(ctx, o, r, rep.Serial, issuer) })
	}
	wg.Wait()
	rep.RefusedEverywhere = true
	var unproven []string
	for _, r := range rep.Replicas {
		rep.ConnectionsLeft += r.Connections
		if r.Evidence != "reported" || !r.Revoked {
			rep.RefusedEverywhere = false
			unproven = append(unproven, r.Name)
		}
	}
	rep.Done = rep.RefusedEverywhere && rep.ConnectionsLeft == 0
	switch {
	case rep.Done:
		rep.Summary = fmt.Sprintf("serial %s is refused by all %d replicas and no connection of it is left", rep.Serial, len(rep.Replicas))
	case rep.RefusedEverywhere:
		rep.Summary = fmt.Sprintf("serial %s is refused by all %d replicas, but %d connections of it are still open", rep.Serial, len(rep.Replicas), rep.ConnectionsLeft)
	default:
		rep.Summary = fmt.Sprintf("serial %s is not proven refused by %s", rep.Serial, strings.Join(unproven, ", "))
	}
	return rep, nil
}

func askRevocation(ctx context.Context, o Options, r Replica, serial, issuer string) ReplicaRevocation {
	out := ReplicaRevocation{Name: r.Address, StatusURL: r.StatusURL, Evidence: "unknown"}
	u, err := url.Parse(r.StatusURL)
	if err != nil {
		out.StatusError = err.Error()
		return out
	}
	q := u.Query()
	q.Set("revoked_serial", serial)
	if issuer != "" {
		q.Set("revoked_issuer", issuer)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	st, err := readStatus(ctx, o.HTTPClient, u.String())
	switch {
	case err != nil:
		out.StatusError = err.Error()
		return out
	case st.Replica != "":
		out.Name = st.Replica
	}
	dl := st.DenyList
	if dl == nil || dl.Serial == nil {
		out.StatusError = "the replica enforces no deny list (hotcert server --deny-list/--crl-file)"
		return out
	}
	if issuer != "" && dl.Serial.Issuer != issuer {
		out.StatusError = "the replica cannot answer for one issuer's serial (an older release): upgrade it, or ask without --revoked-issuer"
		return out
	}
	out.Evidence, out.DenyListVersion = "reported", dl.Version
	out.Revoked, out.Connections, out.DeniedConnections = dl.Serial.Revoked, dl.Serial.Connections, dl.DeniedConnections
	return out
}

// WriteRevocationText prints rep for a person.
func WriteRevocationText(w io.Writer, rep *RevocationReport) error {
	var b strings.Builder
	fmt.Fprintf(&b, "serial %s\n", rep.Serial)
	for _, r := range rep.Replicas {
		switch {
		case r.Evidence != "reported":
			fmt.Fprintf(&b, "  %-24s UNKNOWN: %s\n", r.Name, r.StatusError)
		default:
			verdict := "NOT REVOKED"
			if r.Revoked {
				verdict = "refused"
			}
			fmt.Fprintf(&b, "  %-24s %s by deny list %s, %d connections of it open\n", r.Name, verdict, r.DenyListVersion, r.Connections)
		}
	}
	b.WriteString(rep.Summary + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}
