package inspect

import (
	"context"

	"github.com/hotcert/hotcert"
)

// LoadBundle reads and validates a CA bundle file exactly as an agent loads its
// ca.crt: every PEM block must parse, and the bundle must hold a CA.
func LoadBundle(ctx context.Context, path string) (*hotcert.Material, error) {
	return readBundle(ctx, path)
}
