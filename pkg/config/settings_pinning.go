package config

import "github.com/mcpbus/mcpbus/pkg/pinning"

// PinningSettings are the tool pinning defaults (the policy of a server
// is its own pinning key in the extensions file, else these).
type PinningSettings struct {
	// Default is the policy of a deployment server without a pinning key.
	// Default off.
	Default string `yaml:"default"`
	// Personal is the policy of users' personal connections. Default log.
	Personal string `yaml:"personal"`
	// AutoApproveDescriptive approves, under require_approval, a change
	// that only edits the description and raises no flag. Default false.
	AutoApproveDescriptive bool `yaml:"auto_approve_descriptive"`
}

// Policy is the pinning policy in force for srv: a personal
// connection's is pinning.personal, a deployment server's its own pinning
// key, else pinning.default. Values were checked by Validate and the
// server parser; an unreadable one counts as off.
func (s PinningSettings) Policy(srv *Server, personal bool) pinning.Policy {
	if personal {
		p, _ := pinning.ParsePolicy(s.Personal)
		return p
	}
	if srv != nil && srv.Pinning != "" {
		return srv.Pinning
	}
	p, _ := pinning.ParsePolicy(s.Default)
	return p
}

// pinning checks the pinning policies.
func (v *settingsValidator) pinning(p *PinningSettings) {
	for _, f := range []struct{ key, val string }{{"pinning.default", p.Default}, {"pinning.personal", p.Personal}} {
		if _, err := pinning.ParsePolicy(f.val); err != nil {
			v.errorf(f.key, "%v", err)
		}
	}
}
