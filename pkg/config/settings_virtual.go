package config

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// VirtualServer is one entry of config.yaml's virtual_servers: a named
// subset of the catalog served at its own endpoints (/mcp/v/<name>,
// /sse/v/<name>, mcpbus stdio --virtual <name>, REST ?virtual=<name>, the
// virtual_server field on the bus). pkg/virtual compiles it; see
// docs/virtual-servers.md.
type VirtualServer struct {
	// Name is 1 to 64 of [A-Za-z0-9_-], unique.
	Name string `yaml:"name" json:"name,omitempty"`
	// Description is a note for people.
	Description string `yaml:"description" json:"description,omitempty"`
	// Servers are the server names whose tools the set may hold
	// (deployment servers of extensions_config.json). Required.
	Servers []string `yaml:"servers" json:"servers,omitempty"`
	// Tools are names or path.Match globs over the catalog's visible
	// names (`<server>_<tool>`); empty or absent: every tool of Servers.
	Tools []string `yaml:"tools" json:"tools,omitempty"`
	// Overrides change a tool as this set shows it, keyed by its catalog
	// name.
	Overrides map[string]VirtualToolOverride `yaml:"overrides" json:"overrides,omitempty"`
	// ToolSearch is this set's tool_search setting: true defers every tool
	// behind tool_search, false lists every schema; absent: the
	// deployment's tool_search.enabled.
	ToolSearch *bool `yaml:"tool_search" json:"tool_search,omitempty"`
	// Quotas limit calls per caller × virtual server × tool.
	Quotas []Quota `yaml:"quotas" json:"quotas,omitempty"`
	// Pinning is the tool-pinning policy of this set: off, log,
	// require_approval or block; "" leaves it to each server's.
	Pinning string `yaml:"pinning" json:"pinning,omitempty"`
}

// VirtualToolOverride is how a virtual server shows one tool: a visible name of
// its own, a description, annotations and a routing hint. Empty fields
// keep the catalog's.
type VirtualToolOverride struct {
	Name        string              `yaml:"name" json:"name,omitempty"`
	Description string              `yaml:"description" json:"description,omitempty"`
	Annotations map[string]any      `yaml:"annotations" json:"annotations,omitempty"`
	Routing     *VirtualToolRouting `yaml:"routing" json:"routing,omitempty"`
}

// VirtualToolRouting is a routing hint of a tool in a virtual server (as
// mcpServers' tools.<name>.routing).
type VirtualToolRouting struct {
	Mode     string   `yaml:"mode" json:"mode,omitempty"`
	Priority int      `yaml:"priority" json:"priority,omitempty"`
	Keywords []string `yaml:"keywords" json:"keywords,omitempty"`
}

// Quota is one limit of a virtual server, for each caller × tool matching
// Tools, or of a server (mcpServers.<name>.quotas, over every caller):
// Calls per IntervalSeconds (a fixed window) and Concurrent calls in
// flight, both counted across every toolcall replica.
type Quota struct {
	// Tools are names or globs over the set's visible names; empty: every
	// tool of the set.
	Tools           []string `yaml:"tools" json:"tools,omitempty"`
	Calls           int      `yaml:"calls" json:"calls,omitempty"`
	IntervalSeconds int      `yaml:"interval_seconds" json:"interval_seconds,omitempty"`
	// Concurrent caps calls in flight (0: no cap).
	Concurrent int `yaml:"concurrent" json:"concurrent,omitempty"`
}

// NATSIdentity binds a NATS identity (the user of the per-user subjects
// under nats.bind_identity) to the virtual servers it may use.
type NATSIdentity struct {
	UserID         string   `yaml:"user_id"`
	VirtualServers []string `yaml:"virtual_servers"`
}

// Pinning policies.
const (
	PinningOff             = "off"
	PinningLog             = "log"
	PinningRequireApproval = "require_approval"
	PinningBlock           = "block"
)

// MaxQuotaIntervalSeconds is the longest quota window (a day).
const MaxQuotaIntervalSeconds = 86400

// MaxQuotaConcurrent is the highest concurrent limit: its calls in flight
// are one value in the quota bucket (about 100 bytes each).
const MaxQuotaConcurrent = 1000

var virtualServerName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// visibleToolName is the rule every visible tool name satisfies (the
// catalog's).
var visibleToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ValidGlob reports a tool name or path.Match pattern.
func ValidGlob(p string) bool {
	if strings.TrimSpace(p) == "" {
		return false
	}
	_, err := path.Match(p, "")
	return err == nil
}

// virtualServers checks virtual_servers and every reference to them
// (api.keys[].virtual_servers, nats.identities). A reference to a set
// config.yaml does not define is a warning: the admin API may create it
// (docs/virtual-servers.md); until then the caller can use nothing.
func (v *settingsValidator) virtualServers(s *Settings) {
	names := map[string]int{}
	for i := range s.VirtualServers {
		vs := &s.VirtualServers[i]
		f := fmt.Sprintf("virtual_servers[%d]", i)
		if j, dup := names[vs.Name]; dup {
			v.errorf(f+".name", "repeats virtual_servers[%d].name %q", j, vs.Name)
		} else if virtualServerName.MatchString(vs.Name) {
			names[vs.Name] = i
		}
		v.virtualServer(f, vs)
	}
	known := func(field string, list []string) {
		for j, n := range list {
			if _, ok := names[n]; !ok {
				v.warnf(fmt.Sprintf("%s[%d]", field, j), "names virtual server %q, which virtual_servers does not define: nothing can be used through it until the admin API creates it", n)
			}
		}
	}
	for i, k := range s.API.Keys {
		known(fmt.Sprintf("api.keys[%d].virtual_servers", i), k.VirtualServers)
	}
	seen := map[string]int{}
	for i, id := range s.NATS.Identities {
		f := fmt.Sprintf("nats.identities[%d]", i)
		if strings.TrimSpace(id.UserID) == "" {
			v.errorf(f+".user_id", "must not be empty")
		} else if j, dup := seen[id.UserID]; dup {
			v.errorf(f+".user_id", "repeats nats.identities[%d].user_id", j)
		} else {
			seen[id.UserID] = i
		}
		if len(id.VirtualServers) == 0 {
			v.errorf(f+".virtual_servers", "must name at least one virtual server")
		}
		known(f+".virtual_servers", id.VirtualServers)
	}
	if len(s.NATS.Identities) > 0 && !s.NATS.BindIdentity {
		v.warnf("nats.identities", "applies to the per-user subjects only, and nats.bind_identity is false")
	}
}

// ValidateVirtualServer checks one virtual server with the rules of
// config.yaml's virtual_servers entries (the admin API's check): the
// problems name fields relative to the entry ("servers",
// "quotas[0].interval_seconds").
func ValidateVirtualServer(vs VirtualServer) []Problem {
	v := settingsValidator{file: "virtual server"}
	v.virtualServer("", &vs)
	return v.problems
}

// virtualServer checks one entry of virtual_servers; f is its field
// ("virtual_servers[0]", or "" for a lone entry).
func (v *settingsValidator) virtualServer(f string, vs *VirtualServer) {
	if !virtualServerName.MatchString(vs.Name) {
		v.errorf(field(f, "name"), "must be 1 to 64 letters, digits, '-' or '_', got %q", vs.Name)
	}
	if len(vs.Servers) == 0 {
		v.errorf(field(f, "servers"), "must name at least one server")
	}
	for j, srv := range vs.Servers {
		if strings.TrimSpace(srv) == "" {
			v.errorf(field(f, fmt.Sprintf("servers[%d]", j)), "must not be empty")
		}
	}
	for j, t := range vs.Tools {
		if !ValidGlob(t) {
			v.errorf(field(f, fmt.Sprintf("tools[%d]", j)), "must be a tool name or a glob (path.Match syntax), got %q", t)
		}
	}
	shown := map[string]string{}
	for _, name := range sortedKeys(vs.Overrides) {
		o := vs.Overrides[name]
		of := field(f, "overrides."+name)
		if o.Name != "" {
			if !visibleToolName.MatchString(o.Name) {
				v.errorf(of+".name", "must be 1 to 128 letters, digits, '-' or '_', got %q", o.Name)
			} else if other, dup := shown[o.Name]; dup {
				v.errorf(of+".name", "%q is already the name of overrides.%s", o.Name, other)
			} else {
				shown[o.Name] = name
			}
		}
		if r := o.Routing; r != nil {
			if r.Mode != "off" && r.Mode != "prefer" {
				v.errorf(of+".routing.mode", "must be off or prefer, got %q", r.Mode)
			}
			if r.Priority < 0 || r.Priority > 100 {
				v.errorf(of+".routing.priority", "must be between 0 and 100, got %d", r.Priority)
			}
		}
	}
	for j := range vs.Quotas {
		v.quota(field(f, fmt.Sprintf("quotas[%d]", j)), &vs.Quotas[j])
	}
	switch vs.Pinning {
	case "", PinningOff, PinningLog, PinningRequireApproval, PinningBlock:
	default:
		v.errorf(field(f, "pinning"), "must be off, log, require_approval or block, got %q", vs.Pinning)
	}
}

// field is key under the field prefix f ("" for none).
func field(f, key string) string {
	if f == "" {
		return key
	}
	return f + "." + key
}

func (v *settingsValidator) quota(f string, q *Quota) {
	for j, t := range q.Tools {
		if !ValidGlob(t) {
			v.errorf(fmt.Sprintf("%s.tools[%d]", f, j), "must be a tool name or a glob (path.Match syntax), got %q", t)
		}
	}
	for _, msg := range quotaProblems(*q) {
		v.errorf(f+msg.field, "%s", msg.text)
	}
}

// quotaProblem is one rule a quota breaks: the field under the quota's
// ("" for the quota itself, else ".calls" …) and why.
type quotaProblem struct{ field, text string }

// quotaProblems checks a quota's limits (a virtual server's or a
// server's): calls and concurrent 0 or more, at least one set, and an
// interval of 1 s to a day with calls.
func quotaProblems(q Quota) []quotaProblem {
	var out []quotaProblem
	switch {
	case q.Calls < 0:
		out = append(out, quotaProblem{".calls", fmt.Sprintf("must be 0 or more, got %d", q.Calls)})
	case q.Calls > 0 && (q.IntervalSeconds < 1 || q.IntervalSeconds > MaxQuotaIntervalSeconds):
		out = append(out, quotaProblem{".interval_seconds", fmt.Sprintf("must be between 1 and %d when calls is set, got %d", MaxQuotaIntervalSeconds, q.IntervalSeconds)})
	}
	if q.Concurrent < 0 || q.Concurrent > MaxQuotaConcurrent {
		out = append(out, quotaProblem{".concurrent", fmt.Sprintf("must be between 0 and %d, got %d", MaxQuotaConcurrent, q.Concurrent)})
	}
	if q.Calls == 0 && q.Concurrent == 0 {
		out = append(out, quotaProblem{"", "sets neither calls nor concurrent"})
	}
	return out
}

// VirtualServer returns the virtual server named name, or nil.
func (s *Settings) VirtualServer(name string) *VirtualServer {
	i := slices.IndexFunc(s.VirtualServers, func(v VirtualServer) bool { return v.Name == name })
	if i < 0 {
		return nil
	}
	return &s.VirtualServers[i]
}

// VirtualSettings is what the services need of virtual servers: the sets
// and the NATS identities bound to them.
type VirtualSettings struct {
	Servers    []VirtualServer
	Identities []NATSIdentity
}

// Virtual is the settings' virtual servers and NATS identities.
func (s *Settings) Virtual() VirtualSettings {
	return VirtualSettings{Servers: s.VirtualServers, Identities: s.NATS.Identities}
}
