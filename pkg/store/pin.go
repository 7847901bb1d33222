package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Pin states (mcp_tool_pins.state).
const (
	// PinApproved: the tool is served at ApprovedDigest; nothing waits.
	PinApproved = "approved"
	// PinPending: a changed or new definition (PendingDigest) waits for an
	// admin under require_approval.
	PinPending = "pending"
	// PinBlocked: a changed or new definition was withheld under block; an
	// admin may still approve it.
	PinBlocked = "blocked"
	// PinRejected: an admin refused PendingDigest; it stays withheld until
	// the upstream lists another definition.
	PinRejected = "rejected"
	// PinRemoved: the upstream no longer lists the tool.
	PinRemoved = "removed"
)

// PinStates lists the states, for validation and help texts.
func PinStates() []string {
	return []string{PinApproved, PinPending, PinBlocked, PinRejected, PinRemoved}
}

// ToolPin is one row of mcp_tool_pins: the pin state of one (server
// identity, tool name).
type ToolPin struct {
	Server string // the server's name; a personal connection's runtime name
	Tool   string // the upstream's raw tool name
	Owner  string // the personal connection's user; "" for a deployment server
	Policy string // the pinning policy in force when it was last written
	State  string // one of PinStates
	// ApprovedDigest is the digest served; "" when no definition was ever
	// approved (a new tool waiting).
	ApprovedDigest string
	// PendingDigest is the definition waiting (pending, blocked, rejected).
	PendingDigest string
	// Flags are the pending change's flags (JSON array), nil without one.
	Flags json.RawMessage
	// Generation is the catalog generation the row was last written in.
	Generation int64
	DecidedBy  string
	DecidedAt  *time.Time
	CreatedAt  time.Time // set by the store on first insert
	UpdatedAt  time.Time // set by the store on every write
}

// ToolDefinition is one row of mcp_tool_definitions: a definition seen for
// (Server, Tool), keyed by its digest.
type ToolDefinition struct {
	Server, Tool, Digest string
	// Definition is the canonical JSON the digest was computed over.
	Definition                      json.RawMessage
	FirstGeneration, LastGeneration int64
	FirstSeenAt, LastSeenAt         time.Time // set by the store
}

// PinStore persists tool pinning state (mcp_tool_pins,
// mcp_tool_definitions): discovery records what it sees and reads the
// approvals; the api lists the queue and decides.
type PinStore interface {
	// RecordDefinitions inserts each definition not seen before and moves
	// last_generation and last_seen_at of those seen again.
	RecordDefinitions(ctx context.Context, p RecordDefinitionsParams) error

	// GetDefinition returns one definition, or ErrNotFound.
	GetDefinition(ctx context.Context, p DefinitionParams) (*ToolDefinition, error)

	// ListServerPins returns the pins of one server identity, by tool name.
	ListServerPins(ctx context.Context, p ServerPinsParams) ([]ToolPin, error)

	// PutPin inserts or replaces (Server, Tool), keeping CreatedAt, and
	// returns the stored row.
	PutPin(ctx context.Context, p PutPinParams) (*ToolPin, error)

	// ListPins returns pins in one state ("" for every state), most
	// recently updated first, at most Limit (0: DefaultListLimit).
	ListPins(ctx context.Context, p ListPinsParams) ([]ToolPin, error)

	// DecidePin approves or rejects the pending definition of (Server,
	// Tool) when it is still Digest: approving makes it the approved
	// digest (state approved, no pending change), rejecting keeps it
	// withheld (state rejected). A pin whose pending digest is another
	// (or none) returns ErrConflict; a missing one ErrNotFound.
	DecidePin(ctx context.Context, p DecidePinParams) (*ToolPin, error)
}

// RecordDefinitionsParams are the definitions one discovery saw.
type RecordDefinitionsParams struct {
	Generation  int64
	Definitions []ToolDefinition
	Now         *time.Time
}

// DefinitionParams names one definition.
type DefinitionParams struct {
	Server, Tool, Digest string
}

// ServerPinsParams names one server identity.
type ServerPinsParams struct {
	Server string
}

// PutPinParams is the row PutPin stores.
type PutPinParams struct {
	Pin ToolPin
	Now *time.Time
}

// ListPinsParams selects pins.
type ListPinsParams struct {
	State string
	Limit int
}

// DecidePinParams is an admin's decision on a pending definition.
type DecidePinParams struct {
	Server, Tool, Digest string
	Approve              bool
	By                   string
	Now                  *time.Time
}

// Validate checks what every backend requires of PutPin.
func (p *ToolPin) Validate() error {
	switch {
	case p.Server == "":
		return fmt.Errorf("%w: tool pin: server must not be empty", ErrInvalid)
	case p.Tool == "":
		return fmt.Errorf("%w: tool pin: tool must not be empty", ErrInvalid)
	case p.Policy == "":
		return fmt.Errorf("%w: tool pin: policy must not be empty", ErrInvalid)
	}
	for _, s := range PinStates() {
		if p.State == s {
			return nil
		}
	}
	return fmt.Errorf("%w: tool pin: state %q is not one of %v", ErrInvalid, p.State, PinStates())
}
