package agent

import (
	"crypto/x509"
	"math/rand/v2"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/drain"
)

// ReasonCertExpiring: the agent closed its connection before a certificate it was
// authenticated with expires (Config.ReconnectBeforeExpiry): its client
// certificate or the server certificate it verified.
const ReasonCertExpiring = "cert_expiring"

// planExpiryReconnect plans the end of the session just established before the
// first of its certificates expires: the server chain it verified (leaf first) and
// the client certificate it presented. It returns the function that cancels the
// plan (when the session ends first).
func (a *Agent) planExpiryReconnect(server []*x509.Certificate) (stop func() bool) {
	margin := a.cfg.ReconnectBeforeExpiry
	if margin <= 0 {
		return func() bool { return false }
	}
	chain := server
	if a.identity != nil {
		chain = append(chain[:len(chain):len(chain)], a.identity.Current().Chain()...)
	}
	var notAfter time.Time
	for _, c := range chain {
		if c != nil && (notAfter.IsZero() || c.NotAfter.Before(notAfter)) {
			notAfter = c.NotAfter
		}
	}
	if notAfter.IsZero() {
		return func() bool { return false }
	}
	now, afterFunc := time.Now(), func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	if clk := a.cfg.ExpiryClock; clk != nil {
		now, afterFunc = clk.Now(), clk.AfterFunc
	}
	at := drain.ExpiryDrainTime(now, notAfter, margin, a.cfg.ReconnectOnCertChange, rand.Float64())
	return afterFunc(at.Sub(now), func() {
		if c := a.conn.Load(); c != nil {
			a.log.Info("reconnecting before a certificate of the connection expires", "server", a.cfg.Server,
				"not_after", notAfter.UTC().Format(time.RFC3339), "serial", serialOf(chain, notAfter))
			a.expiring.Store(true)
			(*c).Close()
		}
	})
}

// serialOf is the serial of the first certificate of chain that expires at t.
func serialOf(chain []*x509.Certificate, t time.Time) string {
	for _, c := range chain {
		if c != nil && c.NotAfter.Equal(t) {
			return hotcert.FormatSerial(c.SerialNumber)
		}
	}
	return ""
}
