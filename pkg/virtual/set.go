package virtual

import (
	"encoding/json"
	"path"
	"slices"
	"strconv"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// Set is one compiled virtual server. It is immutable and safe for
// concurrent use.
type Set struct {
	name       string
	servers    map[string]bool
	tools      []string // globs over catalog names; empty: all
	overrides  map[string]config.VirtualToolOverride
	byVisible  map[string]string // override name → catalog name
	toolSearch *bool
	quotas     []config.Quota
	pinning    string
}

// New compiles vs (already validated by config.Settings.Validate).
func New(vs config.VirtualServer) *Set {
	s := &Set{name: vs.Name, servers: map[string]bool{}, tools: slices.Clone(vs.Tools),
		overrides: map[string]config.VirtualToolOverride{}, byVisible: map[string]string{},
		toolSearch: vs.ToolSearch, quotas: slices.Clone(vs.Quotas), pinning: vs.Pinning}
	for _, srv := range vs.Servers {
		s.servers[srv] = true
	}
	for name, o := range vs.Overrides {
		s.overrides[name] = o
		if o.Name != "" && o.Name != name {
			s.byVisible[o.Name] = name
		}
	}
	return s
}

// Name is the virtual server's name.
func (s *Set) Name() string { return s.name }

// Pinning is the set's pinning policy ("" leaves it to each server).
func (s *Set) Pinning() string { return s.pinning }

// ToolSearch is the set's tool_search setting; set false when it follows
// the deployment's.
func (s *Set) ToolSearch() (enabled, set bool) {
	if s.toolSearch == nil {
		return false, false
	}
	return *s.toolSearch, true
}

// AllowsServer reports a server the set may show anything of.
func (s *Set) AllowsServer(server string) bool { return s.servers[server] }

// Allows reports whether the set holds the entry called name (a tool's
// catalog name, a prompt's prefixed name) of server: server is one of its
// servers and name matches one of its globs (any, when it has none). It is
// the one filter for tools, resources and prompts; a resource, which has
// no name of its own in the set, is allowed by its server
// (AllowsServer).
func (s *Set) Allows(server, name string) bool {
	if !s.servers[server] {
		return false
	}
	return matchAny(s.tools, name)
}

// matchAny reports name matching one of globs, true for no globs.
func matchAny(globs []string, name string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// VisibleName is how the set shows the tool whose catalog name is name.
func (s *Set) VisibleName(name string) string {
	if o, ok := s.overrides[name]; ok && o.Name != "" {
		return o.Name
	}
	return name
}

// CatalogName maps a name a caller of the set used to the catalog name it
// stands for: an override's name to its tool, any other name to itself.
// It returns false for a catalog name the set shows under another name
// (the raw name of an overridden tool) and for a catalog name an
// override's name shadows; whether the tool is in the set at all is
// Allows'.
func (s *Set) CatalogName(visible string) (string, bool) {
	if name, ok := s.byVisible[visible]; ok {
		return name, true
	}
	if o, ok := s.overrides[visible]; ok && o.Name != "" && o.Name != visible {
		return "", false
	}
	return visible, true
}

// Tool is t (a catalog entry) as the set shows it, and whether the set
// holds it at all.
func (s *Set) Tool(t bus.Tool) (bus.Tool, bool) {
	if !s.Allows(t.Server, t.Name) {
		return bus.Tool{}, false
	}
	catalogName := t.Name
	visible := s.VisibleName(t.Name)
	if visible != t.Name {
		t.Name = visible
	} else if _, shadowed := s.byVisible[t.Name]; shadowed {
		return bus.Tool{}, false // an override took its name
	}
	if on, set := s.ToolSearch(); set {
		t.Deferred = on
	}
	o, ok := s.overrides[catalogName]
	if !ok {
		return t, true
	}
	if o.Description != "" {
		t.Description = o.Description
	}
	if len(o.Annotations) > 0 {
		merged := map[string]any{}
		_ = json.Unmarshal(t.Annotations, &merged)
		for k, v := range o.Annotations {
			merged[k] = v
		}
		t.Annotations, _ = json.Marshal(merged)
	}
	if r := o.Routing; r != nil {
		t.Routing = &bus.Routing{Mode: r.Mode, Priority: r.Priority, Keywords: slices.Clone(r.Keywords)}
	}
	return t, true
}

// View is the set's view of a catalog: the tools it holds, in catalog
// order, as it shows them.
func (s *Set) View(tools []bus.Tool) []bus.Tool {
	out := make([]bus.Tool, 0, len(tools))
	for _, t := range tools {
		if v, ok := s.Tool(t); ok {
			out = append(out, v)
		}
	}
	return out
}

// Quota is one of the set's quotas matching a tool, with its index in the
// set's quotas (the key counters are kept under).
type Quota struct {
	Index int
	config.Quota
}

// QuotasFor is the set's quotas whose globs match the tool's visible name
// in the set.
func (s *Set) QuotasFor(visible string) []Quota {
	var out []Quota
	for i, q := range s.quotas {
		if matchAny(q.Tools, visible) {
			out = append(out, Quota{Index: i, Quota: q})
		}
	}
	return out
}

// QuotaGroup is the quota counter group (quota.Counter.TakeIn) of quota
// index of the set named set: every caller and tool under it.
func QuotaGroup(set string, index int) string { return set + "." + strconv.Itoa(index) }

// Quotas is the set's quotas, in order.
func (s *Set) Quotas() []config.Quota { return slices.Clone(s.quotas) }
