package pinning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// Who decided an approval that no admin made (store.ToolPin.DecidedBy).
const (
	ByFirstUse    = "mcpbus:first-use"
	ByLogPolicy   = "mcpbus:policy-log"
	ByDescriptive = "mcpbus:auto-approve-descriptive"
)

// Engine decides which definition of each tool discovery serves. Safe for
// concurrent use.
type Engine struct {
	// Store holds the pins and the definitions seen. Required for any
	// policy but Off.
	Store store.PinStore
	// AutoApproveDescriptive approves, under require_approval, a change
	// that only edits the description and raises no flag
	// (pinning.auto_approve_descriptive).
	AutoApproveDescriptive bool
	Log                    *slog.Logger
}

// Server is the server one discovery listed.
type Server struct {
	// ID is the server identity: its name (a personal connection's
	// runtime name).
	ID string
	// Owner is the personal connection's user ("" for a deployment server).
	Owner      string
	Policy     Policy
	Generation int64
}

// Decision is what the engine decided for one listed tool.
type Decision struct {
	// Name is the tool's raw name.
	Name string
	// Serve is the definition to serve, nil when the tool is withheld. It
	// is the listed definition, or the last approved one.
	Serve *Definition
	// Digest is Serve's digest ("" when withheld).
	Digest string
	// Listed is the listed definition's digest.
	Listed string
	// State is the pin state after this discovery ("" under Off).
	State string
}

// Served reports whether the listed definition itself is served.
func (d Decision) Served() bool {
	return d.Serve != nil && d.Digest == d.Listed
}

// Apply records the definitions one discovery listed and decides, per the
// server's policy, what is served. Under log, a store that cannot be
// reached serves everything (and logs it); under require_approval and block
// it is an error: nothing of the server is served unverified.
func (e *Engine) Apply(ctx context.Context, srv Server, listed []Definition) ([]Decision, error) {
	out := make([]Decision, len(listed))
	for i, d := range listed {
		digest := d.Digest()
		out[i] = Decision{Name: d.Name, Serve: &listed[i], Digest: digest, Listed: digest}
	}
	if srv.Policy == Off || srv.Policy == "" {
		return out, nil
	}
	if e.Store == nil {
		return e.unavailable(srv, out, errors.New("no database is configured"))
	}
	if err := e.apply(ctx, srv, listed, out); err != nil {
		return e.unavailable(srv, out, err)
	}
	return out, nil
}

// unavailable is Apply when the pin state cannot be used.
func (e *Engine) unavailable(srv Server, out []Decision, err error) ([]Decision, error) {
	if srv.Policy == Log {
		e.log().Warn("tool pinning state unavailable; serving the listed definitions", "server", srv.ID, observability.Err(err))
		return out, nil
	}
	return nil, fmt.Errorf("pinning: the pin state of server '%s' cannot be read (policy %s): %w", srv.ID, srv.Policy, err)
}

func (e *Engine) log() *slog.Logger {
	if e.Log == nil {
		return observability.Discard()
	}
	return e.Log
}

func (e *Engine) apply(ctx context.Context, srv Server, listed []Definition, out []Decision) error {
	defs := make([]store.ToolDefinition, len(listed))
	names := make([]string, len(listed))
	for i, d := range listed {
		defs[i] = store.ToolDefinition{Server: srv.ID, Tool: d.Name, Digest: out[i].Digest, Definition: d.Canonical()}
		names[i] = d.Name
	}
	if err := e.Store.RecordDefinitions(ctx, store.RecordDefinitionsParams{Generation: srv.Generation, Definitions: defs}); err != nil {
		return err
	}
	rows, err := e.Store.ListServerPins(ctx, store.ServerPinsParams{Server: srv.ID})
	if err != nil {
		return err
	}
	pins := make(map[string]store.ToolPin, len(rows))
	for _, p := range rows {
		pins[p.Tool] = p
	}
	firstUse := len(rows) == 0
	listedNames := map[string]bool{}
	for i, d := range listed {
		listedNames[d.Name] = true
		dec, err := e.decide(ctx, srv, d, out[i].Digest, pins, firstUse, names)
		if err != nil {
			return err
		}
		dec.Listed = out[i].Digest
		out[i] = dec
	}
	// A tool no longer listed is removed: listed again under the same
	// name and definition it is served again, under another name (a
	// rename) it is a new tool.
	for _, p := range rows {
		if !listedNames[p.Tool] && p.State != store.PinRemoved {
			p.State, p.Policy, p.Generation = store.PinRemoved, string(srv.Policy), srv.Generation
			if _, err := e.Store.PutPin(ctx, store.PutPinParams{Pin: p}); err != nil {
				return err
			}
			e.log().Info("pinned tool removed by its server", "server", srv.ID, "tool", p.Tool)
		}
	}
	return nil
}

// decide is one listed tool's decision.
func (e *Engine) decide(ctx context.Context, srv Server, d Definition, digest string, pins map[string]store.ToolPin,
	firstUse bool, names []string) (Decision, error) {
	served := Decision{Name: d.Name, Serve: &d, Digest: digest, State: store.PinApproved}
	pin, known := pins[d.Name]
	put := func(p store.ToolPin) error {
		p.Server, p.Tool, p.Owner, p.Policy, p.Generation = srv.ID, d.Name, srv.Owner, string(srv.Policy), srv.Generation
		_, err := e.Store.PutPin(ctx, store.PutPinParams{Pin: p})
		return err
	}
	approve := func(by string, flags json.RawMessage) (Decision, error) {
		return served, put(store.ToolPin{State: store.PinApproved, ApprovedDigest: digest, Flags: flags, DecidedBy: by, CreatedAt: pin.CreatedAt})
	}
	switch {
	case !known && firstUse:
		return approve(ByFirstUse, nil)
	case known && pin.ApprovedDigest == digest:
		if pin.State != store.PinApproved {
			// Listed again as approved (a revert, or back after removal).
			pin.State, pin.PendingDigest, pin.Flags = store.PinApproved, "", nil
			return served, put(pin)
		}
		return served, nil
	}

	var approved *Definition
	if known && pin.ApprovedDigest != "" {
		row, err := e.Store.GetDefinition(ctx, store.DefinitionParams{Server: srv.ID, Tool: d.Name, Digest: pin.ApprovedDigest})
		if err != nil {
			return Decision{}, err
		}
		a, err := ParseCanonical(row.Definition)
		if err != nil {
			return Decision{}, err
		}
		approved = &a
	}
	diff := Compare(approved, d, names)
	flags, _ := json.Marshal(diff.Flags)
	log := e.log().With("server", srv.ID, "tool", d.Name, "policy", string(srv.Policy), "digest", digest)
	switch {
	case srv.Policy == Log:
		log.Info("tool definition changed; served (pinning: log)", "flags", string(flags), "new_tool", diff.New)
		return approve(ByLogPolicy, flags)
	case srv.Policy == RequireApproval && e.AutoApproveDescriptive && diff.Descriptive:
		log.Info("tool definition changed; a purely descriptive edit, approved by policy")
		return approve(ByDescriptive, flags)
	}

	state := store.PinPending
	if srv.Policy == Block {
		state = store.PinBlocked
	}
	if known && pin.PendingDigest == digest && pin.State == store.PinRejected {
		state = store.PinRejected // refused already: stays withheld, not queued again
	}
	if !known || pin.PendingDigest != digest || pin.State != state {
		log.Warn("tool definition changed; withheld until an admin approves it", "state", state, "flags", string(flags), "new_tool", diff.New)
		p := pin
		p.State, p.PendingDigest, p.Flags = state, digest, flags
		p.DecidedBy, p.DecidedAt = "", nil
		if state == store.PinRejected {
			p.DecidedBy, p.DecidedAt = pin.DecidedBy, pin.DecidedAt
		}
		if err := put(p); err != nil {
			return Decision{}, err
		}
	}
	if srv.Policy == RequireApproval && approved != nil {
		return Decision{Name: d.Name, Serve: approved, Digest: pin.ApprovedDigest, State: state}, nil
	}
	return Decision{Name: d.Name, State: state}, nil
}
