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
	// floors are stricter policies laid over servers from elsewhere (a
	// virtual server's pinning key, RaiseFloor): the stricter applies.
	floors map[string]pinning.Policy
}

// RaiseFloor makes server's policy at least p (pinning.Stricter of its own
// and p): how a virtual server's pinning applies to the servers it lists.
func (s *PinningSettings) RaiseFloor(server string, p pinning.Policy) {
	if s.floors == nil {
		s.floors = map[string]pinning.Policy{}
	}
	s.floors[server] = pinning.Stricter(s.floors[server], p)
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
	p, _ := pinning.ParsePolicy(s.Default)
	if srv == nil {
		return p
	}
	if srv.Pinning != "" {
		p = srv.Pinning
	}
	return pinning.Stricter(p, s.floors[srv.Name])
}

// pinning checks the pinning policies.
func (v *settingsValidator) pinning(p *PinningSettings) {
	for _, f := range []struct{ key, val string }{{"pinning.default", p.Default}, {"pinning.personal", p.Personal}} {
		if _, err := pinning.ParsePolicy(f.val); err != nil {
			v.errorf(f.key, "%v", err)
		}
	}
}
