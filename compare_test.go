package hotcert_test

import (
	"testing"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

func TestSameIdentityAndTrust(t *testing.T) {
	caA, caB := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	l1, l2 := caA.MustIssue(), caA.MustIssue()
	mat := func(l *hotcerttest.Leaf, cas ...*hotcerttest.CA) *hotcert.Material {
		c := hotcert.Content{}
		if l != nil {
			c = identity(l)
		}
		if len(cas) > 0 {
			c = withCA(c, hotcerttest.BundlePEM(cas...))
		}
		m, err := hotcert.Validate(c)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var none *hotcert.Material
	for _, tc := range []struct {
		name              string
		a, b              *hotcert.Material
		sameID, sameTrust bool
	}{
		{"same leaf, bundle changed", mat(l1, caA), mat(l1, caA, caB), true, false},
		{"leaf replaced, same bundle", mat(l1, caA), mat(l2, caA), false, true},
		{"no certificate on either side", mat(nil, caA), mat(nil, caB), true, false},
		{"certificate gained", mat(nil, caA), mat(l1, caA), false, true},
		{"bundle order matters", mat(nil, caA, caB), mat(nil, caB, caA), true, false},
		{"nil and a bundle-only material", none, mat(nil, caA), true, false},
		{"nil and nil", none, none, true, true},
	} {
		if got := tc.a.SameIdentity(tc.b); got != tc.sameID {
			t.Errorf("%s: SameIdentity = %v", tc.name, got)
		}
		if got := tc.b.SameIdentity(tc.a); got != tc.sameID {
			t.Errorf("%s: SameIdentity is not symmetric", tc.name)
		}
		if got := tc.a.SameTrust(tc.b); got != tc.sameTrust {
			t.Errorf("%s: SameTrust = %v", tc.name, got)
		}
	}
}
