package toolcall

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/quota"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Virtual servers on the call path (docs/virtual-servers.md). A call that
// names a virtual server (bus.Call.VirtualServer) is checked
// before anything else runs:
//
//   - policy: a caller on a per-user subject whose NATS identity is bound
//     (nats.identities) must name one of its virtual servers;
//   - set: the name is mapped back to the catalog's (an override's name to
//     its tool; an overridden tool's raw name, or a shadowed one, is not a
//     name of the set) and the tool must be one the set holds; anything
//     else is forbidden, not not_found, so a set never tells what lies
//     outside it;
//   - quotas: the set's limits for the tool, per caller (the user) × set ×
//     tool: calls per window counted across every replica in the quota
//     bucket (pkg/quota), and calls in flight, held in a semaphore in the
//     same bucket (quotas.go).
//
// The rest of the pipeline then runs on the catalog name, so guardrails,
// task-toolset roles and audit see the real tool whatever the set calls
// it.

// virtualState is the service's compiled virtual servers and the quota
// counter.
type virtualState struct {
	// live is config.yaml's sets and the admin API's (Live.Apply on
	// every shared state change).
	live *virtual.Live
	now  func() time.Time

	mu      sync.Mutex
	counter *quota.Counter // opened on first use
}

// newVirtualState compiles the sets; now is the quota clock (nil: time.Now).
func newVirtualState(live *virtual.Live, now func() time.Time) *virtualState {
	return &virtualState{live: live, now: now}
}

// enterSet is the virtual server step of a call: req with its names
// mapped to the catalog's, the set (nil for none) and the release of the
// call's quota slots, or the refusal (forbidden, rate_limited).
func (s *Service) enterSet(ctx context.Context, req bus.Call, note *callNote) (bus.Call, func(), error) {
	release := func() {}
	sets := s.virtual.live.Registry()
	if bound, ok := bus.BoundUser(ctx); ok {
		if err := virtual.Check(sets.IdentitySets(bound), req.VirtualServer, virtual.PolicyIdentity, "NATS identity '"+bound+"'"); err != nil {
			s.decide(note, req.VirtualServer, err)
			return req, release, err
		}
	}
	set, err := sets.Resolve(req.VirtualServer)
	if err != nil || set == nil {
		return req, release, err
	}
	note.set = set.Name()
	visible := req.Tool
	name, ok := set.CatalogName(visible)
	if !ok {
		err := virtual.NotInSet(set.Name(), visible)
		s.decide(note, set.Name(), err)
		return req, release, err
	}
	_, gen, err := s.snapshot()
	if err != nil {
		return req, release, err
	}
	tool, err := s.resolver.resolve(ctx, req.UserID, name, gen)
	if be := bus.AsError(err); be != nil && be.Code == bus.CodeNotFound {
		err = virtual.NotInSet(set.Name(), visible)
		s.decide(note, set.Name(), err)
		return req, release, err
	} else if err != nil {
		return req, release, err
	}
	shown, ok := set.Tool(tool)
	if !ok {
		err := virtual.NotInSet(set.Name(), visible)
		s.decide(note, set.Name(), err)
		return req, release, err
	}
	// The set's own deferral (its tool_search setting) decides, on the
	// names it shows; the pipeline then checks the catalog name.
	promoted := slices.Contains(req.Promoted, visible)
	if shown.Deferred && !promoted {
		return req, release, bus.Errorf(bus.CodeToolDeferred,
			"tool '%s' is deferred: its schema has not been loaded. Call tool_search first (for example with query \"select:%s\"), then call the tool again with the promoted list it returns.", visible, visible)
	}
	req.Tool, req.Promoted = name, []string{name}
	release, err = s.admitQuotas(ctx, set, bus.Scope{UserID: req.UserID}.User(), visible)
	s.decide(note, set.Name(), err)
	if err != nil {
		return req, func() {}, err
	}
	return req, release, nil
}

// decide records the policy decision on a call through set: in the call's
// note (its audit record) and in the decisions counter.
func (s *Service) decide(note *callNote, set string, err error) {
	decision, policy := "allowed", "allowed"
	if be := bus.AsError(err); be != nil {
		decision = string(be.Code)
		policy = decision
		if p, ok := be.Details["policy"].(string); ok {
			policy = p
		}
	}
	note.set, note.policy = set, policy
	if set == "" {
		return
	}
	if _, known := s.virtual.live.Registry().Get(set); !known {
		set = "unknown" // never a caller's string as a label
	}
	s.metrics.VirtualDecisions.WithLabelValues(set, decision).Inc()
}

// admitQuotas takes the call from every quota of set matching the tool
// (its name in the set) for user: calls per window across the replicas,
// then calls in flight across them. A refusal is rate_limited naming the
// quota, with retry_after_seconds.
func (s *Service) admitQuotas(ctx context.Context, set *virtual.Set, user, visible string) (func(), error) {
	qs := set.QuotasFor(visible)
	if len(qs) == 0 {
		return func() {}, nil
	}
	ls := make([]limit, 0, len(qs))
	for _, q := range qs {
		ls = append(ls, limit{Quota: q.Quota,
			label:   fmt.Sprintf("virtual_servers[%s].quotas[%d]", set.Name(), q.Index),
			group:   virtual.QuotaGroup(set.Name(), q.Index),
			subject: set.Name() + "\x00" + strconv.Itoa(q.Index) + "\x00" + user + "\x00" + visible})
	}
	return s.admitLimits(ctx, fmt.Sprintf("tool '%s' in virtual server '%s'", visible, set.Name()), ls)
}

// fedSet is the virtual server step of a resource read, prompt get or
// completion: the bound caller's policy (nats.identities), then the set
// the request names (nil for none).
func (s *Service) fedSet(ctx context.Context, name string) (*virtual.Set, error) {
	sets := s.virtual.live.Registry()
	if bound, ok := bus.BoundUser(ctx); ok {
		if err := virtual.Check(sets.IdentitySets(bound), name, virtual.PolicyIdentity, "NATS identity '"+bound+"'"); err != nil {
			return nil, err
		}
	}
	return sets.Resolve(name)
}

// fedLookup is the error of a read, prompt get or completion whose
// target did not resolve (lookupErr): through a set, not_found is
// forbidden too, so a set never tells what lies outside it (what names
// the target).
func fedLookup(set *virtual.Set, what string, lookupErr error) error {
	if set != nil && lookupErr != nil && bus.AsError(lookupErr).Code == bus.CodeNotFound {
		return virtual.Outside(set.Name(), what)
	}
	return lookupErr
}

// fedInSet is nil when r's set (nil: none) holds what r resolved to: a
// prompt (and a prompt's completion) by its server and visible name, a
// resource by its server.
func fedInSet(r fedRequest) error {
	if r.set == nil {
		return nil
	}
	if r.kind == bus.GuardrailKindPrompt {
		if r.set.Allows(r.server, r.label) {
			return nil
		}
		return virtual.Outside(r.set.Name(), "prompt '"+r.label+"'")
	}
	if r.set.AllowsServer(r.server) {
		return nil
	}
	return virtual.Outside(r.set.Name(), "resource '"+r.label+"'")
}
