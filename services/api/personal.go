package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/services/api/internal/configedit"
)

// personalNamePattern bounds what a user may call a connection.
var personalNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// personalBody is the body of POST /api/mcp/personal-connections.
type personalBody struct {
	Name   string          `json:"name"`
	Server json.RawMessage `json:"server"`
}

// personalView is one connection as the REST API shows it: secrets masked.
type personalView struct {
	Name        string          `json:"name"`
	RuntimeName string          `json:"runtime_name"`
	Server      json.RawMessage `json:"server"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

type personalList struct {
	Connections []personalView `json:"connections"`
}

type personalDeleted struct {
	Name        string `json:"name"`
	RuntimeName string `json:"runtime_name"`
	Deleted     bool   `json:"deleted"`
}

// personalRoutes registers the caller's own connections on the /api group.
func (s *Service) personalRoutes(g *echo.Group) {
	g.GET("/mcp/personal-connections", s.listPersonal)
	g.POST("/mcp/personal-connections", s.putPersonal)
	g.GET("/mcp/personal-connections/:name", s.getPersonal)
	g.DELETE("/mcp/personal-connections/:name", s.deletePersonal)
}

func (s *Service) connections() (store.ConnectionStore, error) {
	if s.deps.Store == nil {
		return nil, bus.Errorf(bus.CodeUnavailable, "personal connections need a database; none is configured for the api service")
	}
	return sealedConnections{ConnectionStore: s.deps.Store.Connections(), sealer: s.deps.Sealer}, nil
}

func viewOf(pc store.PersonalConnection) (personalView, error) {
	masked, err := configedit.MaskServerEntry(pc.Definition)
	if err != nil {
		return personalView{}, bus.Wrap(bus.CodeInternal, err, "a stored personal connection cannot be read")
	}
	return personalView{Name: pc.Name, RuntimeName: pc.RuntimeName, Server: masked, CreatedAt: pc.CreatedAt, UpdatedAt: pc.UpdatedAt}, nil
}

func storeError(err error, what string) error {
	var be *bus.Error
	if errors.As(err, &be) {
		return be // a sealing refusal, already worded for the caller
	}
	if errors.Is(err, store.ErrNotFound) {
		return bus.Errorf(bus.CodeNotFound, "%s not found", what)
	}
	return bus.Wrap(bus.CodeUnavailable, err, "the database cannot serve personal connections right now")
}

func (s *Service) listPersonal(c echo.Context) error {
	cs, err := s.connections()
	if err != nil {
		return err
	}
	rows, err := cs.ListConnections(c.Request().Context(), store.ListConnectionsParams{UserID: callerOf(c).UserID})
	if err != nil {
		return storeError(err, "personal connections")
	}
	out := personalList{Connections: []personalView{}}
	for _, pc := range rows {
		v, err := viewOf(pc)
		if err != nil {
			return err
		}
		out.Connections = append(out.Connections, v)
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Service) getPersonal(c echo.Context) error {
	cs, err := s.connections()
	if err != nil {
		return err
	}
	name := c.Param("name")
	pc, err := cs.GetConnection(c.Request().Context(), store.ConnectionParams{UserID: callerOf(c).UserID, Name: name})
	if err != nil {
		return storeError(err, fmt.Sprintf("personal connection '%s'", name))
	}
	v, err := viewOf(*pc)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// putPersonal creates or replaces one of the caller's connections. On
// replace, "***" restores a stored secret as in PUT /api/mcp/config. An
// edit that changes the definition changes the runtime name and removes the
// old runtime name's OAuth token row.
func (s *Service) putPersonal(c echo.Context) error {
	cs, err := s.connections()
	if err != nil {
		return err
	}
	var body personalBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if !personalNamePattern.MatchString(body.Name) {
		return bus.Errorf(bus.CodeInvalidRequest, "name must be 1 to 64 letters, digits, '_' or '-'")
	}
	if len(body.Server) == 0 || bytes.Equal(bytes.TrimSpace(body.Server), []byte("null")) {
		return unprocessable("server is required: send {\"name\": ..., \"server\": {...}} with the same schema as an mcpServers entry")
	}
	ctx := c.Request().Context()
	user := callerOf(c).UserID
	prev, err := cs.GetConnection(ctx, store.ConnectionParams{UserID: user, Name: body.Name})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return storeError(err, "personal connection")
	}
	var stored json.RawMessage
	if prev != nil {
		stored = prev.Definition
	} else if err := s.checkPersonalCap(ctx, user); err != nil {
		return err
	}
	def, err := configedit.MergeServerEntry(body.Name, stored, body.Server)
	if err != nil {
		return editError(err)
	}
	if err := s.validatePersonal(body.Name, def); err != nil {
		return err
	}
	runtime, err := bus.PersonalRuntimeName(user, body.Name, def)
	if err != nil {
		return bus.Wrap(bus.CodeInvalidRequest, err, "the server definition is not valid JSON")
	}
	if prev != nil && prev.RuntimeName != runtime {
		// The old definition's connected account goes (revoked while the
		// tokens service can still find it).
		s.disconnectPersonal(ctx, prev.RuntimeName, user)
	}
	pc, err := cs.PutConnection(ctx, store.PutConnectionParams{Connection: store.PersonalConnection{
		UserID: user, Name: body.Name, RuntimeName: runtime, Definition: def}})
	if err != nil {
		return storeError(err, "personal connection")
	}
	if prev != nil && prev.RuntimeName != runtime {
		s.dropToken(ctx, prev.RuntimeName, user)
	}
	s.auditPersonal(c, "put_personal_connection", body.Name, stored, def)
	s.personalChanged(user)
	v, err := viewOf(*pc)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if prev != nil {
		status = http.StatusOK
	}
	return c.JSON(status, v)
}

// checkPersonalCap refuses a new connection once the user has
// MaxPersonalPerUser of them (409). Replacing one by name never gets here.
// Two creations racing at the limit may both pass; the cap bounds abuse,
// it is not an exact quota.
func (s *Service) checkPersonalCap(ctx context.Context, user string) error {
	rows, err := s.deps.Store.Connections().ListConnections(ctx, store.ListConnectionsParams{UserID: user})
	if err != nil {
		return storeError(err, "personal connections")
	}
	if len(rows) >= s.cfg.MaxPersonalPerUser {
		return &statusError{status: http.StatusConflict, err: &bus.Error{Code: bus.CodeInvalidRequest,
			Details: map[string]any{"limit": s.cfg.MaxPersonalPerUser, "setting": "personal_connections.max_per_user"},
			Message: fmt.Sprintf("you already have %d personal connections, the limit set by personal_connections.max_per_user (%d); delete one or replace one by name", len(rows), s.cfg.MaxPersonalPerUser)}}
	}
	return nil
}

func (s *Service) deletePersonal(c echo.Context) error {
	cs, err := s.connections()
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	user, name := callerOf(c).UserID, c.Param("name")
	what := fmt.Sprintf("personal connection '%s'", name)
	pc, err := cs.GetConnection(ctx, store.ConnectionParams{UserID: user, Name: name})
	if err != nil {
		return storeError(err, what)
	}
	s.disconnectPersonal(ctx, pc.RuntimeName, user)
	if err := cs.DeleteConnection(ctx, store.ConnectionParams{UserID: user, Name: name}); err != nil {
		return storeError(err, what)
	}
	s.dropToken(ctx, pc.RuntimeName, user)
	s.auditPersonal(c, "delete_personal_connection", name, pc.Definition, nil)
	s.personalChanged(user)
	return c.JSON(http.StatusOK, personalDeleted{Name: name, RuntimeName: pc.RuntimeName, Deleted: true})
}

// validatePersonal checks a personal definition: no "$VAR" strings (a user
// must not read the host's environment) and no cwd, the extensions schema,
// header and URL values (configedit.CheckEntryValues), and the personal launch
// policy (launchpolicy.Personal: stdio only when enabled, on an operator's
// launch spec), the same check discovery and toolcall make before they
// spawn.
func (s *Service) validatePersonal(name string, def json.RawMessage) error {
	var v any
	if err := json.Unmarshal(def, &v); err != nil {
		return unprocessable(fmt.Sprintf("personal MCP server '%s' is not valid JSON", name))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return unprocessable(fmt.Sprintf("personal MCP server '%s' must be a JSON object", name))
	}
	if _, ok := m["cwd"]; ok {
		return &bus.Error{Code: bus.CodeInvalidRequest, Details: details(name, "cwd", ""),
			Message: fmt.Sprintf("personal MCP server '%s' cannot set cwd; stdio servers run in the thread workspace", name)}
	}
	if field := envReference("", v); field != "" {
		return &bus.Error{Code: bus.CodeInvalidRequest, Details: details(name, field, ""),
			Message: fmt.Sprintf("personal MCP server '%s' field '%s' starts with '$': personal connections cannot read environment variables; put the value itself", name, field)}
	}
	doc, err := json.Marshal(map[string]any{"mcpServers": map[string]json.RawMessage{name: def}})
	if err != nil {
		return bus.Wrap(bus.CodeInternal, err, "cannot encode the definition")
	}
	ext, err := config.ParseExtensions("personal connection", doc)
	if err != nil {
		return unprocessable(fmt.Sprintf("personal MCP server '%s' is invalid", name))
	}
	for _, p := range ext.Problems {
		if p.Severity == config.SeverityError {
			return &statusError{status: http.StatusUnprocessableEntity, err: &bus.Error{Code: bus.CodeInvalidRequest,
				Message: "Invalid MCP server: " + problemText(p), Details: details(p.Server, p.Field, "")}}
		}
	}
	if err := configedit.CheckEntryValues(name, def); err != nil {
		return editError(err)
	}
	srv := ext.Server(name)
	if srv == nil {
		return unprocessable(fmt.Sprintf("personal MCP server '%s' is invalid", name))
	}
	if _, err := s.personal.Check(srv); err != nil {
		return editError(err)
	}
	return s.checkEgress(name, srv)
}

// envReference returns the path of the first string value starting with
// "$", or "".
func envReference(path string, v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 0 && x[0] == '$' {
			return path
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if f := envReference(p, x[k]); f != "" {
				return f
			}
		}
	case []any:
		for i, e := range x {
			if f := envReference(fmt.Sprintf("%s[%d]", path, i), e); f != "" {
				return f
			}
		}
	}
	return ""
}

// dropToken removes the OAuth chain row of a personal runtime name
// (mcp_oauth_tokens.connection_key = runtime name). A row that another user
// owns is left alone; failures are logged (the row is unreachable anyway:
// nothing resolves the old runtime name any more).
func (s *Service) dropToken(ctx context.Context, runtimeName, user string) {
	ts := s.deps.Store.Tokens()
	t, err := ts.GetToken(ctx, store.GetTokenParams{Key: runtimeName})
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err != nil {
		s.log.Warn("cannot read the oauth token row of a personal connection", observability.Server(runtimeName), observability.Err(err))
		return
	}
	if t.OwnerUserID != "" && t.OwnerUserID != user {
		s.log.Warn("oauth token row of a personal runtime name belongs to another user; left in place", observability.Server(runtimeName))
		return
	}
	if err := ts.DeleteToken(ctx, store.DeleteTokenParams{Key: runtimeName}); err != nil {
		s.log.Warn("cannot delete the oauth token row of a personal connection", observability.Server(runtimeName), observability.Err(err))
	}
}

// personalChanged tells discovery and toolcall that a user's personal
// connections changed.
func (s *Service) personalChanged(user string) {
	body, _ := json.Marshal(bus.PersonalServersRequest{UserID: user})
	if err := s.deps.NC.Publish(s.deps.Names.PersonalEvents(user), body); err != nil {
		s.log.Warn("cannot announce a personal connection change", observability.Err(err))
	}
}

// personalServers answers mcpbus.internal.personal: the user's connections,
// unmasked, for the services that run them.
func (s *Service) personalServers(ctx context.Context, req bus.PersonalServersRequest) (bus.PersonalServersReply, error) {
	if req.UserID == "" {
		return bus.PersonalServersReply{}, bus.Errorf(bus.CodeInvalidRequest, "user_id is required")
	}
	cs, err := s.connections()
	if err != nil {
		return bus.PersonalServersReply{}, err
	}
	rows, err := cs.ListConnections(ctx, store.ListConnectionsParams{UserID: req.UserID})
	if err != nil {
		return bus.PersonalServersReply{}, storeError(err, "personal connections")
	}
	out := bus.PersonalServersReply{UserID: req.UserID, Servers: []bus.PersonalServer{}}
	for _, pc := range rows {
		out.Servers = append(out.Servers, bus.PersonalServer{Name: pc.Name, RuntimeName: pc.RuntimeName, Definition: pc.Definition, UpdatedAt: pc.UpdatedAt})
	}
	return out, nil
}
