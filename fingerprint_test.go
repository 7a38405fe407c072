package hotcert_test

import (
	"strings"
	"testing"

	"github.com/hotcert/hotcert"
)

func TestParseFingerprintReadsOpensslAndHotcertForms(t *testing.T) {
	var fp hotcert.Fingerprint
	for i := range fp {
		fp[i] = byte(i * 7)
	}
	for _, s := range []string{fp.String(), fp.Colon(), "sha256 Fingerprint=" + fp.Colon(), " " + strings.ToUpper(fp.String()) + "\n"} {
		got, err := hotcert.ParseFingerprint(s)
		if err != nil || got != fp {
			t.Errorf("ParseFingerprint(%q) = %x, %v; want %x", s, got, err, fp)
		}
	}
	for _, s := range []string{"", "zz", fp.String()[:62], fp.String() + "00"} {
		if _, err := hotcert.ParseFingerprint(s); err == nil {
			t.Errorf("ParseFingerprint(%q) accepted a malformed fingerprint", s)
		}
	}
}
