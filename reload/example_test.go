package reload_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/reload"
)

// staticSource is a Source of one fixed text.
type staticSource string

func (s staticSource) Read(context.Context) (string, error)    { return string(s), nil }
func (staticSource) Watch(ctx context.Context, _ func()) error { <-ctx.Done(); return nil }
func (staticSource) String() string                            { return "static" }

// An engine for content of your own (here a greeting that must not be empty),
// configured by the same options as hotcert's reloaders.
func Example() {
	var s reload.Settings
	for _, o := range []hotcert.ReloadOption{hotcert.WithComponent("greeting"), hotcert.WithSettle(time.Second)} {
		o.ApplyReload(&s)
	}
	var cur string
	e := reload.New[string, string](staticSource("hello"), reload.Spec[string, string]{
		Hash: func(c string) [32]byte { return sha256.Sum256([]byte(c)) },
		Validate: func(c string) (string, error) {
			if strings.TrimSpace(c) == "" {
				return "", errors.New("empty greeting")
			}
			return c, nil
		},
		CurrentHash: func() [32]byte { return sha256.Sum256([]byte(cur)) },
		Publish:     func(v string) { cur = v },
		Failed:      func(err error) { fmt.Println("refused:", err) },
		Settle:      s.Settle,
		Poll:        s.Poll,
	})
	cur, err := e.Initial(context.Background(), s.InitialWait)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Attrs()[:2], cur)
	// Output: [component greeting] hello
}
