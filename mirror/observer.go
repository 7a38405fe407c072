package mirror

// Reasons a mirror update fails, passed to [Observer.ObserveFailure] and logged as
// the reason attribute: stable, and safe as a metric label.
const (
	// ReasonPassword: the password file could not be read or holds no usable
	// password; the PKCS#12 files keep the last good one.
	ReasonPassword = "password"
	// ReasonEncode: the material could not be encoded (PKCS#12); no file of that
	// update was written.
	ReasonEncode = "encode"
	// ReasonWrite: a file could not be written (a full disk, a directory in the
	// way); it is tried again after a while and on the next change.
	ReasonWrite = "write"
)

// Observer receives the outcome of every mirror update, for metrics; package
// metrics provides a Prometheus implementation (metrics.NewMirror). Calls are
// made once per update written and once per distinct failure.
type Observer interface {
	// ObserveWritten is called after files were renamed into the directory; files
	// names them (e.g. "tls.crt", "keystore.p12"), in the order they were
	// renamed. initial is true for the first write of a Mirror.
	ObserveWritten(component string, files []string, initial bool)
	// ObserveFailure is called once per distinct failure, with one of the
	// Reason constants.
	ObserveFailure(component, reason string)
}

type nopObserver struct{}

func (nopObserver) ObserveWritten(string, []string, bool) {}
func (nopObserver) ObserveFailure(string, string)         {}
