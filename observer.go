package hotcert

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

type nopObserver struct{}

func (nopObserver) ObserveLoad(string, *Material, bool) {}
func (nopObserver) ObserveFailure(string, error)        {}
