package mirror

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
	"github.com/hotcert/hotcert/source/file"
)

// password follows the PKCS#12 password file with the reload engine every hotcert
// reloader runs (read from one kubelet generation, deduplicated by content, a
// refused password logged and counted once, the last good one kept).
type password struct {
	engine *reload.Engine[hotcert.Input, *secret]
	cur    atomic.Pointer[secret]
}

// secret is a password and the hash of the file content it came from. It is
// never logged.
type secret struct {
	value string
	hash  [32]byte
}

// passwordFile is the password file as a reload source.
type passwordFile struct{ set *file.Set }

func (p passwordFile) Read(context.Context) (hotcert.Input, error) {
	ins, err := p.set.Read()
	if err != nil {
		return hotcert.Input{}, err
	}
	return ins[0], nil
}

func (p passwordFile) Watch(ctx context.Context, changed func()) error {
	return p.set.Watch(ctx, changed)
}

func (p passwordFile) String() string { return p.set.String() }

// newPassword loads the password file (an error if it is missing or refused)
// and returns it, calling changed after every later change once Run runs.
func newPassword(ctx context.Context, path string, c *config, changed func(), failed func(error)) (*password, error) {
	set, err := file.NewSet([]file.File{{Path: path}}, file.WithLogger(c.reload.Logger))
	if err != nil {
		return nil, err
	}
	p := &password{}
	p.engine = reload.New[hotcert.Input, *secret](passwordFile{set}, reload.Spec[hotcert.Input, *secret]{
		Hash:         func(in hotcert.Input) [32]byte { return sha256.Sum256(in.Data) },
		Validate:     validatePassword,
		CurrentHash:  func() [32]byte { return p.cur.Load().hash },
		Publish:      func(s *secret) { p.cur.Store(s); changed() },
		Failed:       failed,
		ReadErrorKey: hotcert.ReadErrorKey,
		WatchFailed: func(err error, retryIn time.Duration) {
			c.reload.Logger.Warn("mirror password file watch failed; relying on polling until it restarts",
				append(c.reload.Attrs(), "file", path, "error", err.Error(), "retry_in", retryIn.String())...)
		},
		Settle: c.reload.Settle,
		Poll:   c.reload.Poll,
	})
	s, err := p.engine.Initial(ctx, c.reload.InitialWait)
	if err != nil {
		return nil, err
	}
	p.cur.Store(s)
	return p, nil
}

// value returns the password in use.
func (p *password) value() string { return p.cur.Load().value }

// validatePassword turns the file's content into a password: one trailing newline
// is dropped; empty, non-UTF-8 or characters PKCS#12's BMPString cannot carry are
// refused. Errors never hold the password.
func validatePassword(in hotcert.Input) (*secret, error) {
	v := string(in.Data)
	if s, ok := strings.CutSuffix(v, "\r\n"); ok {
		v = s
	} else {
		v = strings.TrimSuffix(v, "\n")
	}
	bad := func(detail string) error {
		return &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonParse, Detail: detail}
	}
	switch {
	case v == "":
		return nil, &hotcert.Error{Input: in.Name, Reason: hotcert.ReasonEmpty, Detail: "PKCS#12 password file is empty"}
	case !utf8.ValidString(v):
		return nil, bad("PKCS#12 password is not UTF-8")
	case strings.ContainsRune(v, 0):
		return nil, bad("PKCS#12 password holds a NUL character")
	}
	for _, r := range v {
		if r > 0xFFFF {
			return nil, bad("PKCS#12 password holds a character outside the Basic Multilingual Plane, which PKCS#12 cannot carry")
		}
	}
	return &secret{value: v, hash: sha256.Sum256(in.Data)}, nil
}
