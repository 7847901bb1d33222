package virtual

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// Policy names in forbidden errors' details.policy.
const (
	PolicyKey      = "api.keys[].virtual_servers"
	PolicyIdentity = "nats.identities"
	PolicySet      = "virtual_servers"
)

// Registry is every virtual server of config.yaml, by name, and the NATS
// identities bound to some of them. The zero value and nil hold none.
// Immutable; safe for concurrent use.
type Registry struct {
	sets  map[string]*Set
	users map[string][]string // nats.identities
}

// NewRegistry compiles virtual_servers and nats.identities (validated by
// config.Settings.Validate).
func NewRegistry(s config.VirtualSettings) *Registry {
	r := &Registry{sets: map[string]*Set{}, users: map[string][]string{}}
	for _, vs := range s.Servers {
		r.sets[vs.Name] = New(vs)
	}
	for _, id := range s.Identities {
		r.users[id.UserID] = slices.Clone(id.VirtualServers)
	}
	return r
}

// Get is the set named name.
func (r *Registry) Get(name string) (*Set, bool) {
	if r == nil {
		return nil, false
	}
	s, ok := r.sets[name]
	return s, ok
}

// Names is every set's name, sorted.
func (r *Registry) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.sets))
	for n := range r.sets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Len is how many sets there are.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.sets)
}

// IdentitySets is the virtual servers a NATS identity (a per-user
// subject's user) is bound to, nil when it is not bound.
func (r *Registry) IdentitySets(user string) []string {
	if r == nil {
		return nil
	}
	return r.users[user]
}

// Resolve is the set a request names: nil for "" (the whole catalog), a
// not_found error for a name no set has.
func (r *Registry) Resolve(name string) (*Set, error) {
	if name == "" {
		return nil, nil
	}
	s, ok := r.Get(name)
	if !ok {
		return nil, bus.Errorf(bus.CodeNotFound, "virtual server '%s' is not defined", name)
	}
	return s, nil
}

// Check is the policy decision for a caller bound to allowed (nil: not
// bound, anything goes) asking for the virtual server requested ("" is
// the whole catalog). policy names where the binding comes from
// (PolicyKey, PolicyIdentity) and who the caller is.
func Check(allowed []string, requested, policy, who string) error {
	if allowed == nil || slices.Contains(allowed, requested) {
		return nil
	}
	e := bus.Errorf(bus.CodeForbidden, "%s may use only the virtual servers %s (%s)", who, strings.Join(quoted(allowed), ", "), policy)
	if requested == "" {
		e.Message += ": use one of them (/mcp/v/<name>, ?virtual=<name>, virtual_server)"
	} else {
		e.Message += fmt.Sprintf(", not '%s'", requested)
	}
	e.Details = map[string]any{"policy": policy, "virtual_server": requested, "allowed": allowed}
	return e
}

// NotInSet is the forbidden error of a tool name the set does not hold.
func NotInSet(set, name string) error { return Outside(set, "tool '"+name+"'") }

// Outside is the forbidden error of anything (what: "prompt 'x'",
// "resource 'uri'") the set does not hold.
func Outside(set, what string) error {
	e := bus.Errorf(bus.CodeForbidden, "%s is not in virtual server '%s' (%s)", what, set, PolicySet)
	e.Details = map[string]any{"policy": PolicySet, "virtual_server": set}
	return e
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "'" + n + "'"
	}
	return out
}

// Compile is the registry in force: config.yaml's virtual servers and
// NATS identities (file), then the admin API's virtual servers (fromAPI,
// sharedstate.VirtualRecord) whose names config.yaml does not define.
// config.yaml's sets are read-only through the API, so a clash only
// comes from a later edit of the file, and the file wins. An API entry
// that fails config.ValidateVirtualServer (written by hand into the KV
// bucket) is left out.
func Compile(file config.VirtualSettings, fromAPI []config.VirtualServer) *Registry {
	if len(fromAPI) == 0 {
		return NewRegistry(file)
	}
	all := slices.Clone(file.Servers)
	for _, vs := range fromAPI {
		if FromFile(file, vs.Name) || config.HasErrors(config.ValidateVirtualServer(vs)) {
			continue
		}
		all = append(all, vs)
	}
	return NewRegistry(config.VirtualSettings{Servers: all, Identities: file.Identities})
}

// FromFile reports a virtual server config.yaml defines.
func FromFile(file config.VirtualSettings, name string) bool {
	return slices.ContainsFunc(file.Servers, func(vs config.VirtualServer) bool { return vs.Name == name })
}
