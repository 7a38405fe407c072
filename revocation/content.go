package revocation

import "github.com/hotcert/hotcert"

// Content is the raw material one read of a [Source] returns. Either part may be
// absent, not both.
type Content struct {
	// DenyList is the deny-list file (see the package documentation for its grammar).
	DenyList hotcert.Input
	// CRLs holds one or more X.509 CRLs: PEM "X509 CRL" blocks, or one DER CRL.
	CRLs hotcert.Input
	// Source describes where the content was read from, for logs and [List.Source].
	Source string
}

// Hash returns the SHA-256 of the content's data (hotcert.HashInputs); names are not
// hashed.
func (c Content) Hash() [32]byte { return hotcert.HashInputs(c.DenyList, c.CRLs) }

// Source reads deny-list content and reports when it may have changed: hotcert's
// one source contract ([hotcert.SourceOf]) over [Content]. [Files] reads files;
// [FromInputs] turns any reader of raw inputs (a source/kube Keys reader of a
// Secret or ConfigMap) into one.
type Source = hotcert.SourceOf[Content]
