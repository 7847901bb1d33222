package egress

// CheckDialed is checkDialed for tests: the check of a resolved address,
// as the dialer runs it for a host dialled by an allowlisted name (named)
// or by any other.
func (p *Policy) CheckDialed(address string, named bool) error { return p.checkDialed(address, named) }
