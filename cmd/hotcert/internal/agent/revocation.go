package agent

import (
	"context"
	"crypto/x509"
	"fmt"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/metrics"
	"github.com/hotcert/hotcert/revocation"
)

// ComponentDenyList is the component of the agent's deny list (Config.DenyList).
const ComponentDenyList = "agent_deny_list"

// loadDenyList, with Config.DenyList, loads the list the control plane's
// certificate is checked against, its CRLs verified against the agent's CA bundle.
func (a *Agent) loadDenyList() error {
	cfg := &a.cfg
	if cfg.DenyList == nil {
		return nil
	}
	opts := []revocation.Option{hotcert.WithComponent(ComponentDenyList), hotcert.WithLogger(a.log), revocation.WithStalePolicy(cfg.StaleCRLPolicy)}
	if !cfg.Watch {
		opts = append(opts, hotcert.WithSettle(0)) // read when dialing: report a bad list at once
	}
	for _, o := range cfg.ReloaderOptions {
		if ro, ok := o.(hotcert.ReloadOption); ok {
			opts = append(opts, ro)
		}
	}
	var m *metrics.DenyList
	if cfg.Registerer != nil {
		var err error
		if m, err = metrics.NewDenyList(cfg.Registerer, cfg.MetricsOptions...); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		opts = append(opts, revocation.WithObserver(m))
	}
	var err error
	if a.deny, err = revocation.New(context.Background(), cfg.DenyList, a.ca, opts...); err != nil {
		return fmt.Errorf("agent: deny list: %w", err)
	}
	if m != nil {
		// Its one connection, if the list in use denies the control plane it is
		// open to (0 once followDenyList closed it): what the census reads.
		m.CountDenied(ComponentDenyList, func() int {
			if chain := a.c.streamChain(); len(chain) > 0 && a.deny.Current().Check(chain) != nil {
				return 1
			}
			return 0
		})
	}
	return nil
}

// followDenyList runs until ctx ends: with Config.Watch it follows the list's
// source, and whenever the list changes it drops the connection if the list now
// denies the control plane's certificate it was handshaken with; the reconnect's
// handshake then refuses that certificate.
func (a *Agent) followDenyList(ctx context.Context) {
	if a.cfg.Watch {
		go func() { _ = a.deny.Start(ctx) }()
		defer a.deny.Close()
	}
	stop := a.deny.Subscribe(func(_, next *revocation.List) {
		chain := a.serverChain.Load()
		if chain == nil {
			return
		}
		if err := next.Check(*chain); err != nil {
			a.log.Warn("closing connection: control plane certificate revoked", "server", a.cfg.Server,
				"deny_list_version", next.Version(), "reason", err.Error())
			if c := a.conn.Load(); c != nil {
				(*c).Close()
			}
		}
	})
	<-ctx.Done()
	stop()
}

// setServerChain remembers the verified chain of the control plane's certificate
// of the last handshake.
func (a *Agent) setServerChain(chain []*x509.Certificate) { a.serverChain.Store(&chain) }
