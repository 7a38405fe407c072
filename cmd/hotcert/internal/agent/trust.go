package agent

import (
	"context"

	"github.com/hotcert/hotcert/cmd/hotcert/internal/agentrpc"
)

// trustReport is what the agent tells the control plane it trusts and presents,
// in its register and heartbeat messages, for the control plane's fleet view of a
// CA rotation.
//
// Without Config.Watch the bundle is read on every connection only; before each
// heartbeat's report it is read once more (content already seen is not parsed or
// reported again), so the report says what the agent's next connection will trust
// rather than what its last one did. With Config.TrustGuard the report includes the
// CA the guard keeps beyond the bundle: the agent's next connection trusts it.
func (a *Agent) trustReport(ctx context.Context, refresh bool) *agentrpc.TrustReport {
	if refresh && !a.cfg.Watch {
		_ = a.ca.Reload(ctx) // a bundle that does not load keeps the last good one, logged and counted by the reloader
	}
	r := &agentrpc.TrustReport{CAs: a.trust.Current().Summary().CAs, PerConnect: true}
	if a.identity != nil {
		r.Leaf = a.identity.Current().Summary().Leaf
	}
	if a.deny != nil {
		r.DenyListVersion = a.deny.Current().Version()
	}
	return r
}
