package hotcert

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Source reads raw TLS content and reports when it may have changed. Implementations
// live in source/file (kubelet-aware directory watch) and source/kube (Secret and
// ConfigMap informers); [Compose] joins an identity source and a trust source.
type Source = SourceOf[Content]

// SourceOf is the one source contract of hotcert's reloaders, over the raw content C
// they read: [Content] for TLS material ([Source]), jwtkeys.Content for JWT keys
// (jwtkeys.Source).
type SourceOf[C any] interface {
	// Read returns the current content. It may be called concurrently with Watch.
	// Errors should be [*Error] values naming the input: the reloader reports a
	// failing read once per input and reason ([ReadErrorKey]), so the messages of
	// one outage may vary from read to read. An error that is not an [*Error] is
	// identified by its message.
	Read(ctx context.Context) (C, error)
	// Watch blocks until ctx is done, calling changed whenever the content may have
	// changed. Spurious calls are fine (the reloader deduplicates by content hash);
	// missed ones are not, so a watch error must never end watching. It returns nil
	// once ctx is done, or an error if watching cannot start at all.
	Watch(ctx context.Context, changed func()) error
	// String describes the source for logs, e.g. "files cert=/tls/tls.crt key=/tls/tls.key".
	String() string
}

// Compose returns a Source whose identity (certificate and key) comes from identity
// and whose trust bundle comes from trust: a server certificate from a Secret with a
// CA bundle from a ConfigMap, or from files. A CA bundle that identity also carries
// (e.g. a Secret's ca.crt) is ignored. The result is validated as one snapshot.
func Compose(identity, trust Source) Source { return &composite{identity: identity, trust: trust} }

type composite struct{ identity, trust Source }

func (c *composite) Read(ctx context.Context) (Content, error) {
	id, err := c.identity.Read(ctx)
	if err != nil {
		return Content{}, err
	}
	tr, err := c.trust.Read(ctx)
	if err != nil {
		return Content{}, err
	}
	return Content{Cert: id.Cert, Key: id.Key, CA: tr.CA, Source: c.String()}, nil
}

// Watch watches both sides. When one side's watch fails (or ends before ctx), the
// other is stopped too and Watch returns that side's error: the Reloader logs it
// and restarts both after a backoff (polling covers the gap), as it does for any
// source. One side never keeps watching alone with the other's failure unseen.
func (c *composite) Watch(ctx context.Context, changed func()) error {
	parent := ctx
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		wg     sync.WaitGroup
		once   sync.Once
		failed error
	)
	for _, s := range []Source{c.identity, c.trust} {
		wg.Go(func() {
			err := s.Watch(ctx, changed)
			if parent.Err() != nil {
				return // shutting down
			}
			if err == nil {
				err = errors.New("the watch ended on its own")
			}
			once.Do(func() {
				failed = fmt.Errorf("hotcert: watching %s: %w", s, err)
				cancel() // stop the other side
			})
		})
	}
	wg.Wait()
	return failed
}

func (c *composite) String() string {
	return fmt.Sprintf("identity from %s, trust from %s", c.identity, c.trust)
}
