package jwtkeys_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/jwtkeys"
)

// A token signed before a rotation keeps verifying during the grace period; tokens
// signed after it carry the new key's kid.
func Example() {
	ctx := context.Background()
	keyA, _ := jwtkeys.GenerateSigningKey(jwtkeys.ES256)
	keyB, _ := jwtkeys.GenerateSigningKey(jwtkeys.EdDSA)
	src := jwtkeys.NewMemorySource(jwtkeys.Content{SigningKey: hotcert.Input{Name: "signing.key", Data: keyA}})

	ks, err := jwtkeys.New(ctx, src, jwtkeys.WithMaxTokenTTL(time.Hour), jwtkeys.WithIssuer("https://cp.example"))
	if err != nil {
		panic(err)
	}
	defer ks.Close()
	before, _ := ks.Issue("agent-1", 30*time.Minute)

	// Rotate (a file or Secret source would see the new signing.key by itself).
	src.Set(jwtkeys.Content{SigningKey: hotcert.Input{Name: "signing.key", Data: keyB}})
	if err := ks.Reload(ctx); err != nil {
		panic(err)
	}
	after, _ := ks.Issue("agent-2", 30*time.Minute)

	for _, tok := range []string{before, after} {
		c, err := ks.Verify(tok)
		fmt.Println(c.Subject, err)
	}
	for _, k := range ks.Info().Keys {
		fmt.Println(k.Algorithm, k.State)
	}
	_, err = ks.Verify("eyJhbGciOiJub25lIn0.e30.")
	fmt.Println(jwtkeys.RejectReasonOf(err))
	// Output:
	// agent-1 <nil>
	// agent-2 <nil>
	// EdDSA signing
	// ES256 retired
	// algorithm
}
