package hotcert

import (
	"math/big"
	"strings"
)

// FormatSerial formats a certificate serial number as `openssl x509 -serial`
// prints it: upper-case hex with an even number of digits (a leading zero kept,
// so serial 0x0ABC is "0ABC", never "abc"), a minus sign before a negative one.
// Every hotcert log line and error prints serials this way, so an operator can
// search for one with the other.
func FormatSerial(n *big.Int) string {
	if n == nil {
		return ""
	}
	s := strings.ToUpper(new(big.Int).Abs(n).Text(16))
	if len(s)%2 == 1 {
		s = "0" + s
	}
	if n.Sign() < 0 {
		s = "-" + s
	}
	return s
}
