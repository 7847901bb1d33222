package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Virtual servers (pkg/virtual): mcpbus.tools.list and .search with a
// virtual_server answer that set's view of the caller's catalog, a
// catalog of its own (paging, revision, hints and deferral all follow
// the view). A caller on a per-user subject whose NATS identity is bound
// to virtual servers (nats.identities) must name one of them.

// forSet is the catalog the request's virtual server shows: c itself
// for none, after the bound caller's policy check.
func (s *Service) forSet(ctx context.Context, c *catalog, name string) (*catalog, error) {
	set, err := s.setFor(ctx, name)
	if err != nil || set == nil {
		return c, err
	}
	return c.view(set), nil
}

// setFor is the virtual server a request names (nil for none), after
// the bound caller's policy check (nats.identities).
func (s *Service) setFor(ctx context.Context, name string) (*virtual.Set, error) {
	sets := s.virtual.Registry()
	if bound, ok := bus.BoundUser(ctx); ok {
		if err := virtual.Check(sets.IdentitySets(bound), name, virtual.PolicyIdentity, "NATS identity '"+bound+"'"); err != nil {
			return nil, err
		}
	}
	return sets.Resolve(name)
}

// inSet is items without those set does not hold (all of them for no
// set): hold(set, item) decides.
func inSet[T any](set *virtual.Set, items []T, hold func(*virtual.Set, T) bool) []T {
	if set == nil {
		return items
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		if hold(set, it) {
			out = append(out, it)
		}
	}
	return out
}

// viewsKept bounds the views one catalog keeps (one per virtual server).
const viewsKept = 256

// setView is a view kept in catalog.views under its set's name, with the
// compiled set it was built for.
type setView struct {
	set *virtual.Set
	cat *catalog
}

// view is set's view of c, built once per catalog and compiled set (a
// set the admin API changes is a new *virtual.Set, whose view replaces
// the one kept under its name): the agent
// tools the set holds as it shows them (its overrides and tool_search
// setting), with the hash, revision, routing hints and deferred section
// of those, and the failed servers among its own. Its full listing is
// the same view: toolcall never asks for a virtual server's.
func (c *catalog) view(set *virtual.Set) *catalog {
	kept, ok := c.views.Load(set.Name())
	if ok && kept.(setView).set == set {
		return kept.(setView).cat
	}
	ts := c.ts
	if on, ok := set.ToolSearch(); ok {
		ts.Enabled = on
	}
	agent := set.View(c.agent)
	v := &catalog{ext: c.ext, gen: c.gen, ts: ts, servers: c.servers, all: agent, agent: agent,
		deferred: map[string]bool{}, failed: []bus.FailedServer{}, clashes: c.clashes, counts: map[string]int{}}
	for _, t := range agent {
		if t.Deferred {
			v.deferred[t.Name] = true
		}
		v.counts[t.Server]++
	}
	for _, f := range c.failed {
		if set.AllowsServer(f.Server) {
			v.failed = append(v.failed, f)
		}
	}
	v.hash = catalogHash(agent)
	v.hints = routingHints(agent)
	v.deferredSection = deferredSection(agent)
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(struct {
		Set   string     `json:"virtual_server"`
		Tools []bus.Tool `json:"tools"`
		Hints string     `json:"hints"`
	}{set.Name(), agent, v.hints})
	v.revision = hex.EncodeToString(h.Sum(nil))
	if ok || c.viewCount.Add(1) <= viewsKept {
		c.views.Store(set.Name(), setView{set: set, cat: v})
	}
	return v
}
