package mirror

import (
	"io"
	"io/fs"
	"log/slog"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// Defaults of a [Mirror].
const (
	// DefaultComponent is the component label of metrics and log lines.
	DefaultComponent = "mirror"
	// DefaultKeyFileMode is the mode of tls.key and keystore.p12: readable by the
	// mirror's user only. Run the program that reads them as the same user, or give
	// [WithKeyFileMode] 0o640 with a group both share (a pod's fsGroup).
	DefaultKeyFileMode fs.FileMode = 0o600
	// DefaultFileMode is the mode of the files that hold no secret: tls.crt,
	// ca.crt and truststore.p12.
	DefaultFileMode fs.FileMode = 0o644
	// DefaultRetry is how long a write that failed (a full disk) waits before it
	// is tried again; a change of the material or the password tries at once.
	DefaultRetry = 5 * time.Second
)

// Option configures a [Mirror]. Besides the options of this package, a Mirror
// accepts hotcert's reload options (hotcert.ReloadOption): hotcert.WithComponent,
// WithComponentLabel, WithLogger and WithLogAttrs name and log its lines, and
// WithSettle, WithPollInterval and WithInitialWait apply to the password file,
// which is followed like TLS material.
type Option interface {
	// ApplyReload sets the option on t, a Mirror's configuration. Its exported
	// name and public parameter are what let hotcert.ReloadOption be an Option too.
	ApplyReload(t reload.Target)
}

type optionFunc func(*config)

// ApplyReload implements [Option]. A target that is not a Mirror's configuration
// (another reloader's) is left alone.
func (f optionFunc) ApplyReload(t reload.Target) {
	if c, ok := t.(*config); ok {
		f(c)
	}
}

type config struct {
	reload       reload.Settings // component, logger, settle and poll of the password file
	passwordFile string          // "": no PKCS#12 files
	observer     Observer
	keyMode      fs.FileMode
	fileMode     fs.FileMode
	retry        time.Duration
}

func (c *config) ReloadSettings() *reload.Settings { return &c.reload }

func defaultConfig() config {
	return config{
		reload: reload.Settings{
			Component: DefaultComponent,
			Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
			Settle:    hotcert.DefaultSettle,
			Poll:      hotcert.DefaultPollInterval,
		},
		observer: nopObserver{},
		keyMode:  DefaultKeyFileMode,
		fileMode: DefaultFileMode,
		retry:    DefaultRetry,
	}
}

// WithPKCS12 also writes keystore.p12 (leaf, chain and key) and truststore.p12
// (the CA bundle), encrypted and integrity-protected with the password held in
// passwordFile. The file is followed like TLS material (a kubelet volume's
// "..data" swap included): a new password rewrites both files. One trailing
// newline ("\n" or "\r\n") is not part of the password, so `echo pw > file`
// works. An empty password, or one that PKCS#12 cannot carry (not UTF-8, or a
// character outside the Basic Multilingual Plane), is refused: logged and
// counted once, the files keep the last good password.
func WithPKCS12(passwordFile string) Option {
	return optionFunc(func(c *config) { c.passwordFile = passwordFile })
}

// WithObserver reports writes and failures to o (see metrics.NewMirror).
func WithObserver(o Observer) Option {
	return optionFunc(func(c *config) {
		if o != nil {
			c.observer = o
		}
	})
}

// WithKeyFileMode sets the mode of tls.key and keystore.p12 (default
// [DefaultKeyFileMode]). Only permission bits are used.
func WithKeyFileMode(mode fs.FileMode) Option {
	return optionFunc(func(c *config) { c.keyMode = mode & fs.ModePerm })
}

// withRetry sets how long a failed write waits before it is tried again (tests).
func withRetry(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.retry = d
		}
	})
}
