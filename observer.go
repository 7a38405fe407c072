package hotcert

// nopObserver is the Observer of a Reloader given none ([WithObserver]).
type nopObserver struct{}

func (nopObserver) ObserveLoad(string, *Material, bool) {}
func (nopObserver) ObserveFailure(string, error)        {}
