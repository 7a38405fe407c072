package hotcert

// neverUpdated returns the inputs of src that never change, and whether src
// can tell.
func neverUpdated(src Source) ([]string, bool) {
	if n, ok := src.(NeverUpdated); ok {
		return n.NeverUpdated(), true
	}
	return nil, false
}

// NeverUpdated implements [NeverUpdated] for the sides that do.
func (c *composite) NeverUpdated() []string {
	a, _ := neverUpdated(c.identity)
	b, _ := neverUpdated(c.trust)
	return append(a, b...)
}
