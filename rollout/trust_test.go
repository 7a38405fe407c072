package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/hotcert/hotcert"
	"github.com/hotcert/hotcert/hotcerttest"
)

func TestCheckTrust(t *testing.T) {
	root, other := hotcerttest.MustNewCA(), hotcerttest.MustNewCA()
	inter := root.MustNewIntermediate()
	leaf := inter.MustIssue()
	chain := hotcert.Input{Name: "Secret ns/tls", Data: leaf.ChainPEM}
	now := time.Now()
	if err := CheckTrust(chain, hotcert.Input{Name: "b", Data: append(append([]byte{}, other.CertPEM...), root.CertPEM...)}, now); err != nil {
		t.Errorf("trusted chain: %v", err)
	}
	err := CheckTrust(chain, hotcert.Input{Name: "ConfigMap ns/ca key ca.crt", Data: other.CertPEM}, now)
	if err == nil || !strings.Contains(err.Error(), "Secret ns/tls") || !strings.Contains(err.Error(), "ConfigMap ns/ca key ca.crt") {
		t.Errorf("untrusted chain: %v", err)
	}
	if err := CheckTrust(chain, hotcert.Input{Name: "b", Data: hotcerttest.Truncate(root.CertPEM)}, now); err == nil {
		t.Error("a truncated bundle was accepted")
	}
}
