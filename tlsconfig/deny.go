package tlsconfig

import (
	"crypto/x509"
	"fmt"

	"github.com/hotcert/hotcert/revocation"
)

// DenyList hands out the deny list in use; a *revocation.Reloader is one.
type DenyList interface {
	// Current returns the list in use (nil denies nothing). It must not block.
	Current() *revocation.List
}

// WithDenyList refuses, at every handshake — full or resumed, server side and
// client side — a peer whose verified chain the current list of d denies
// (package revocation: revoked serials per issuer, SPKI hashes, CRLs). The list is
// read per handshake, so a new list applies to the next handshake without any
// config being rebuilt; package drain ends the live connections it covers.
func WithDenyList(d DenyList) Option {
	return optionFunc(func(s *settings) { s.deny = d })
}

// checkDenied refuses chains when the list denies any of them.
func checkDenied(d DenyList, chains [][]*x509.Certificate, resumed bool) error {
	if d == nil {
		return nil
	}
	l := d.Current()
	for _, c := range chains {
		if err := l.Check(c); err != nil {
			if resumed {
				return fmt.Errorf("tlsconfig: resumed session refused: %w", err)
			}
			return fmt.Errorf("tlsconfig: peer refused: %w", err)
		}
	}
	return nil
}
