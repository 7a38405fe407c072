package hotcert

// The contracts of package hotcert that a program implements or consumes: what
// hands out Material and tells of changes (Provider, Notifier; the Store and the
// Reloader implement both), what a Reloader reports to (Observer,
// NeverUpdatedObserver), asks its Source (NeverUpdated) and hands it (SourceLogger).

import "log/slog"

// Provider hands out the current Material. [Store] and [Reloader] implement it; the
// tlsconfig and grpccreds packages depend only on this interface.
type Provider interface {
	// Current returns the Material in use. It never blocks and never allocates.
	Current() *Material
}

// Notifier tells subscribers that the current Material changed.
type Notifier interface {
	// Subscribe calls fn(prev, next) after the current Material changes, on a
	// goroutine of its own. Changes that happen while fn runs are coalesced: fn then
	// sees the Material it last saw and the newest one. The first prev is the
	// Material current when Subscribe was called: a change that races the
	// subscription is delivered too. The returned function unsubscribes and waits
	// for a running fn to return.
	Subscribe(fn func(prev, next *Material)) (unsubscribe func())
}

// Observer receives the outcome of every load, for metrics. The metrics package
// provides a Prometheus implementation. Calls come from the Reloader's goroutine, once
// per distinct change or distinct bad content — never per handshake or per poll.
type Observer interface {
	// ObserveLoad is called with the Material that is now in use: once for the first
	// load (initial true) and once per successful reload.
	ObserveLoad(component string, m *Material, initial bool)
	// ObserveFailure is called once per distinct bad content that was rejected after
	// its settle window, while the last good Material keeps serving.
	ObserveFailure(component string, err error)
}

// NeverUpdated is implemented by a [Source] that can tell that some of its
// inputs will never change where it reads them: a file that a Kubernetes
// subPath mount bind-mounted once, when the container started (package
// source/file). A rotation then reaches the process only when it restarts. The
// Reloader reports them once, after its first load, to an Observer that
// implements [NeverUpdatedObserver].
type NeverUpdated interface {
	// NeverUpdated names the inputs (file paths) that never change.
	NeverUpdated() []string
}

// NeverUpdatedObserver is an [Observer] that is told, once per Reloader, which
// inputs of its source will never be updated (none is an empty list). The
// metrics package's Recorder implements it.
type NeverUpdatedObserver interface {
	ObserveNeverUpdated(component string, inputs []string)
}

// SourceLogger is implemented by a [Source] that logs by itself, such as the
// Kubernetes sources of package source/kube, which say when their watch is lost
// and when it is back. A Reloader hands such a source its own logger, carrying its
// component attribute and [WithLogAttrs], when it is created, so that the source's
// lines sit with the Reloader's and do not go to a discarding default. A source
// given a logger of its own keeps it. [Compose] hands it to both sides.
type SourceLogger interface {
	// SetDefaultLogger sets the logger the source uses unless it was given one.
	SetDefaultLogger(l *slog.Logger)
}
