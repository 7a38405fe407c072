package hotcert

import "github.com/hotcert/hotcert/internal/reload"

// WithComponentLabel names the log attribute that carries the component (see
// [WithComponent]) on every line of a reloader: loads, reloads, failures and watch
// problems alike (default "component"). Give it the name of the metrics' component
// label (metrics.WithComponentLabel), so that one name finds a component in logs
// and metrics: "listener" gives listener=agent_grpc on every line and
// hotcert_tls_reload_failures_total{listener="agent_grpc"}. An empty name keeps
// the default.
func WithComponentLabel(name string) ReloadOption {
	return reloadOption(func(s *reload.Settings) {
		if name != "" {
			s.ComponentKey = name
		}
	})
}

// logAttrs are the attributes every line of r starts with.
func (r *Reloader) logAttrs() []any {
	s := reload.Settings{Component: r.cfg.component, ComponentKey: r.cfg.componentKey, LogAttrs: r.cfg.logAttrs}
	return s.Attrs()
}
