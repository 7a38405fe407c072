package jwtkeys

import (
	"context"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/hotcert/hotcert"
)

// Source reads raw key content and reports when it may have changed: hotcert's one
// source contract (hotcert.SourceOf) over key [Content]. The jwtfile and jwtkube
// packages implement it for a kubelet-projected directory and for one Kubernetes
// Secret, [MemorySource] for programs and tests.
type Source = hotcert.SourceOf[Content]

// Verifier checks tokens. [KeySet] implements it; a gRPC or HTTP middleware should
// depend on this interface only.
type Verifier interface {
	// Verify checks token's signature, key, algorithm and time claims and returns
	// its registered claims, or a *VerifyError.
	Verify(token string) (*jwt.RegisteredClaims, error)
}

// Issuer issues tokens. [KeySet] implements it.
type Issuer interface {
	// Issue returns a token for subject that expires after ttl.
	Issue(subject string, ttl time.Duration) (string, error)
}

// TokenSource hands out the token a client presents. See [NewFileTokenSource],
// [NewRenewingTokenSource] and [NewIssuingTokenSource]; package jwtgrpc turns one
// into gRPC per-RPC credentials.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// TokenSourceFunc adapts a function to [TokenSource].
type TokenSourceFunc func(ctx context.Context) (string, error)

// Token implements [TokenSource].
func (f TokenSourceFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

// Observer receives a KeySet's outcomes, for metrics; package jwtmetrics provides a
// Prometheus implementation. Calls for loads and failures come from the KeySet's
// goroutine, once per distinct change or distinct bad content, never per poll.
type Observer interface {
	// ObserveLoad is called with the set now in use: once for the first load
	// (initial true) and once per reload of distinct good content.
	ObserveLoad(component string, info SetInfo, initial bool)
	// ObserveFailure is called once per distinct bad content that was rejected after
	// its settle window, while the last good key set keeps serving.
	ObserveFailure(component string, err error)
	// ObserveKeys is called whenever the keys that verify change without a reload:
	// when a retired key leaves its grace period.
	ObserveKeys(component string, info SetInfo)
	// ObserveVerify is called once per verified token with "" (accepted) or the
	// RejectReason it was rejected for. It must be cheap: it runs on the request path.
	ObserveVerify(component string, rejected RejectReason)
}
