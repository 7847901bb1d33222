package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/pinning"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// pinView is one tool pin as GET /api/mcp/pins shows it: the state, the
// digests, and for a definition waiting, the diff against the approved one
// with its flags.
type pinView struct {
	Server         string        `json:"server"`
	Tool           string        `json:"tool"`
	Owner          string        `json:"owner,omitempty"`
	Policy         string        `json:"policy"`
	State          string        `json:"state"`
	ApprovedDigest string        `json:"approved_digest,omitempty"`
	PendingDigest  string        `json:"pending_digest,omitempty"`
	Diff           *pinning.Diff `json:"diff,omitempty"`
	Generation     int64         `json:"generation"`
	DecidedBy      string        `json:"decided_by,omitempty"`
	DecidedAt      *time.Time    `json:"decided_at,omitempty"`
	UpdatedAt      time.Time     `json:"updated_at"`
}

// pinsReply is the body of GET /api/mcp/pins.
type pinsReply struct {
	Pins []pinView `json:"pins"`
}

// pinDecision is the body of POST /api/mcp/pins/approve and /reject.
type pinDecision struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Digest is the pending digest the admin reviewed: a definition that
	// changed again since is not decided (409).
	Digest string `json:"digest"`
}

// pinRoutes registers the admin-only tool pinning routes on the /api group.
func (s *Service) pinRoutes(g *echo.Group) {
	g.GET("/mcp/pins", s.listPins, requireAdmin)
	g.POST("/mcp/pins/approve", func(c echo.Context) error { return s.decidePin(c, true) }, requireAdmin)
	g.POST("/mcp/pins/reject", func(c echo.Context) error { return s.decidePin(c, false) }, requireAdmin)
}

func (s *Service) pins() (store.PinStore, error) {
	if s.deps.Store == nil {
		return nil, bus.Errorf(bus.CodeUnavailable, "tool pinning needs a database; none is configured for the api service")
	}
	return s.deps.Store.Pins(), nil
}

func pinStoreError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return bus.Errorf(bus.CodeNotFound, "no pinned tool has that server and tool name")
	case errors.Is(err, store.ErrConflict):
		return &statusError{status: http.StatusConflict, err: &bus.Error{Code: bus.CodeInvalidRequest,
			Message: "digest: that definition is no longer the one waiting; list the pins again and review the current diff"}}
	}
	return bus.Wrap(bus.CodeUnavailable, err, "the database cannot serve tool pins right now")
}

// listPins serves the pins in ?state= (default pending; "all" for every
// state), most recently changed first, at most ?limit= (default 100).
func (s *Service) listPins(c echo.Context) error {
	ps, err := s.pins()
	if err != nil {
		return err
	}
	state := c.QueryParam("state")
	switch {
	case state == "":
		state = store.PinPending
	case state == "all":
		state = ""
	case !slices.Contains(store.PinStates(), state):
		return bus.Errorf(bus.CodeInvalidRequest, "state must be all or one of %v, got %q", store.PinStates(), state)
	}
	limit := 100
	if v := c.QueryParam("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return bus.Errorf(bus.CodeInvalidRequest, "limit must be from 1 to 1000")
		}
	}
	ctx := c.Request().Context()
	rows, err := ps.ListPins(ctx, store.ListPinsParams{State: state, Limit: limit})
	if err != nil {
		return pinStoreError(err)
	}
	out := pinsReply{Pins: make([]pinView, 0, len(rows))}
	for _, p := range rows {
		v, err := pinViewOf(ctx, ps, p)
		if err != nil {
			return pinStoreError(err)
		}
		out.Pins = append(out.Pins, v)
	}
	return c.JSON(http.StatusOK, out)
}

// pinViewOf is p's view, with the diff of its pending definition against
// the approved one (cross-tool references judged against the server's
// other pinned tools).
func pinViewOf(ctx context.Context, ps store.PinStore, p store.ToolPin) (pinView, error) {
	v := pinView{Server: p.Server, Tool: p.Tool, Owner: p.Owner, Policy: p.Policy, State: p.State,
		ApprovedDigest: p.ApprovedDigest, PendingDigest: p.PendingDigest, Generation: p.Generation,
		DecidedBy: p.DecidedBy, DecidedAt: p.DecidedAt, UpdatedAt: p.UpdatedAt}
	if p.PendingDigest == "" {
		return v, nil
	}
	load := func(digest string) (*pinning.Definition, error) {
		row, err := ps.GetDefinition(ctx, store.DefinitionParams{Server: p.Server, Tool: p.Tool, Digest: digest})
		if err != nil {
			return nil, err
		}
		d, err := pinning.ParseCanonical(row.Definition)
		return &d, err
	}
	next, err := load(p.PendingDigest)
	if err != nil {
		return v, err
	}
	var approved *pinning.Definition
	if p.ApprovedDigest != "" {
		if approved, err = load(p.ApprovedDigest); err != nil {
			return v, err
		}
	}
	siblings, err := ps.ListServerPins(ctx, store.ServerPinsParams{Server: p.Server})
	if err != nil {
		return v, err
	}
	others := make([]string, 0, len(siblings))
	for _, o := range siblings {
		others = append(others, o.Tool)
	}
	d := pinning.Compare(approved, *next, others)
	v.Diff = &d
	return v, nil
}

// decidePin approves or rejects a pending definition, audits it, and
// tells every discovery replica (mcpbus.events.pins) to discover the
// server again.
func (s *Service) decidePin(c echo.Context, approve bool) error {
	ps, err := s.pins()
	if err != nil {
		return err
	}
	var body pinDecision
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	for _, f := range []struct{ name, val string }{{"server", body.Server}, {"tool", body.Tool}, {"digest", body.Digest}} {
		if f.val == "" {
			return bus.Errorf(bus.CodeInvalidRequest, "%s: required", f.name)
		}
	}
	ctx := c.Request().Context()
	pin, err := ps.DecidePin(ctx, store.DecidePinParams{Server: body.Server, Tool: body.Tool, Digest: body.Digest,
		Approve: approve, By: callerOf(c).UserID})
	if err != nil {
		return pinStoreError(err)
	}
	action, op := "reject_tool", "rejected"
	if approve {
		action, op = "approve_tool", "approved"
	}
	s.deps.Audit.Write(ctx, audit.Record{Kind: audit.KindConfig, User: callerOf(c).UserID, Action: action,
		Server: pin.Server, Tool: pin.Tool, Outcome: pin.State,
		Changes:   []audit.Change{{Server: pin.Server, Op: op, Keys: []string{"tools." + pin.Tool, "digest:" + body.Digest}}},
		RequestID: c.Response().Header().Get(echo.HeaderXRequestID)})
	ev, _ := json.Marshal(bus.PinEvent{Server: pin.Server, Owner: pin.Owner})
	if err := s.deps.NC.Publish(s.deps.Names.PinEvents(), ev); err != nil {
		s.log.Warn("pin event not published; discovery applies the decision at its next rediscovery", observability.Err(err))
	}
	v, err := pinViewOf(ctx, ps, *pin)
	if err != nil {
		return pinStoreError(err)
	}
	s.log.Info("tool pin decided", "decision", op, "server", pin.Server, "tool", pin.Tool, "user", callerOf(c).UserID)
	return c.JSON(http.StatusOK, v)
}
