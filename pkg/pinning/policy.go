package pinning

import (
	"fmt"
	"strings"
)

// Policy is a server's pinning policy.
type Policy string

// The policies.
const (
	// Off: nothing is recorded; calls may still carry a digest.
	Off Policy = "off"
	// Log: every definition is served and recorded; a change is logged
	// with its flags and approved by the policy.
	Log Policy = "log"
	// RequireApproval: a changed tool is served at its last approved
	// definition, and a new one withheld, until an admin approves it.
	RequireApproval Policy = "require_approval"
	// Block: a changed or new tool is withheld until an admin approves it.
	Block Policy = "block"
)

// Policies are the accepted values, in order of strictness.
var Policies = []Policy{Off, Log, RequireApproval, Block}

// PolicyNames are the accepted values as strings.
func PolicyNames() []string {
	out := make([]string, len(Policies))
	for i, p := range Policies {
		out[i] = string(p)
	}
	return out
}

// PoliciesText names the values for error messages.
func PoliciesText() string { return strings.Join(PolicyNames(), ", ") }

// ParsePolicy reads a policy; "" is Off.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return Off, nil
	}
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("must be one of %s, got %q", PoliciesText(), s)
}

// Stricter returns the stricter of p and q (a virtual server's policy is
// applied on top of its servers' own this way).
func Stricter(p, q Policy) Policy {
	rank := func(x Policy) int {
		for i, v := range Policies {
			if v == x {
				return i
			}
		}
		return 0
	}
	if rank(q) > rank(p) {
		return q
	}
	return p
}
