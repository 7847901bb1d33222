package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/services/api/internal/configedit"
)

// configReply is the body of GET, PUT and PATCH /api/mcp/config.
type configReply struct {
	MCPServers json.RawMessage `json:"mcp_servers"`
}

// putConfigBody is the body of PUT /api/mcp/config.
type putConfigBody struct {
	MCPServers json.RawMessage `json:"mcp_servers"`
}

// patchConfigBody is the body of PATCH /api/mcp/config.
type patchConfigBody struct {
	ServerName string `json:"server_name"`
	Enabled    *bool  `json:"enabled"`
}

// configRoutes registers the admin-only config routes on the /api group.
func (s *Service) configRoutes(g *echo.Group) {
	g.GET("/mcp/config", s.getConfig, requireAdmin)
	g.PUT("/mcp/config", s.putConfig, requireAdmin)
	g.PATCH("/mcp/config", s.patchConfig, requireAdmin)
}

func (s *Service) configPath() (string, error) {
	if s.cfg.ExtensionsPath == "" {
		return "", bus.Errorf(bus.CodeConfigError, "this api service owns no extensions config file")
	}
	return s.cfg.ExtensionsPath, nil
}

// getConfig serves the raw file's servers ($VAR placeholders, not expanded
// values) with every secret masked.
func (s *Service) getConfig(c echo.Context) error {
	path, err := s.configPath()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return bus.Wrap(bus.CodeInternal, err, "cannot read the MCP configuration")
	}
	return s.replyMasked(c, data)
}

func (s *Service) replyMasked(c echo.Context, data []byte) error {
	masked, err := configedit.MaskedServers(data)
	if err != nil {
		return bus.Wrap(bus.CodeConfigError, err, "the MCP configuration file cannot be read: "+documentProblem(err))
	}
	return c.JSON(http.StatusOK, configReply{MCPServers: masked})
}

// putConfig replaces the server set (reference §1.5), validates the result
// (schema and launch policy), writes it atomically, publishes it and resets
// the caches.
func (s *Service) putConfig(c echo.Context) error {
	path, err := s.configPath()
	if err != nil {
		return err
	}
	var body putConfigBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if len(body.MCPServers) == 0 || bytes.Equal(bytes.TrimSpace(body.MCPServers), []byte("null")) {
		return unprocessable("mcp_servers is required: send {\"mcp_servers\": {name: server}}")
	}
	var written, before []byte
	err = configedit.EditFile(path, func(cur []byte, _ bool) ([]byte, error) {
		before = cur
		next, err := configedit.ReplaceServers(cur, body.MCPServers)
		if err != nil {
			return nil, err
		}
		if err := s.validateCandidate(path, next, ""); err != nil {
			return nil, err
		}
		written = next
		return next, nil
	})
	if err != nil {
		return editError(err)
	}
	s.auditConfig(c, "put_config", before, written)
	s.configChanged(c.Request().Context(), "config updated")
	return s.replyMasked(c, written)
}

// patchConfig changes only the enabled flag of one server. Enabling runs
// the launch policy on that server; disabling never validates.
func (s *Service) patchConfig(c echo.Context) error {
	path, err := s.configPath()
	if err != nil {
		return err
	}
	var body patchConfigBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if body.ServerName == "" {
		return unprocessable("server_name is required (at least 1 character)")
	}
	if body.Enabled == nil {
		return unprocessable("enabled is required (true or false)")
	}
	var written, before []byte
	err = configedit.EditFile(path, func(cur []byte, _ bool) ([]byte, error) {
		before = cur
		next, err := configedit.SetServerEnabled(cur, body.ServerName, *body.Enabled)
		if err != nil {
			return nil, err
		}
		if *body.Enabled {
			if err := s.validateCandidate(path, next, body.ServerName); err != nil {
				return nil, err
			}
		}
		written = next
		return next, nil
	})
	if err != nil {
		return editError(err)
	}
	s.auditConfig(c, "patch_config", before, written)
	s.configChanged(c.Request().Context(), "config server toggled")
	return s.replyMasked(c, written)
}

// documentProblem says what is wrong with an extensions document that does
// not parse, without the file's path or any other cause text.
func documentProblem(err error) string {
	var fe *config.FileError
	if errors.As(err, &fe) {
		return fe.Problem
	}
	return "the document cannot be parsed"
}

// validateCandidate checks a config about to be written, as written (a
// "$VAR" is judged by its placeholder, not by this host's environment): the
// schema (422), header and URL values (configedit.CheckServerValues, the rules
// of the call path), reserved names and the launch policy (400); for every
// server, or only for the one named only.
func (s *Service) validateCandidate(path string, data []byte, only string) error {
	ext, err := config.ParseExtensionsAsWritten(path, data)
	if err != nil {
		return &configedit.EditError{Kind: configedit.EditSchema, Message: "Invalid MCP configuration: " + documentProblem(err)}
	}
	for _, p := range ext.Problems {
		if p.Severity != config.SeverityError || (only != "" && p.Server != only) {
			continue
		}
		return &configedit.EditError{Kind: configedit.EditSchema, Server: p.Server, Field: p.Field, Message: "Invalid MCP configuration: " + problemText(p)}
	}
	if err := configedit.CheckServerValues(data, only); err != nil {
		return err
	}
	for _, srv := range ext.Servers {
		if (only == "" || srv.Name == only) && bus.PersonalRuntimeNamePattern.MatchString(srv.Name) {
			return &configedit.EditError{Kind: configedit.EditInvalid, Server: srv.Name,
				Message: "MCP server name '" + srv.Name + "' is reserved for personal connections (p_ followed by 12 hex digits); choose another name."}
		}
	}
	return s.policy.CheckServers(data, only)
}

// problemText renders a problem without the file path.
func problemText(p config.Problem) string {
	out := ""
	if p.Server != "" {
		out = "MCP server '" + p.Server + "': "
	}
	if p.Field != "" {
		out += p.Field + ": "
	}
	return out + p.Message
}

// configChanged publishes the file to every replica and resets the caches.
// The file is already written: failures are logged, not returned (the
// follower loop republishes a changed file on its next tick).
func (s *Service) configChanged(ctx context.Context, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	if s.pub != nil {
		if _, err := s.publish(ctx, true); err != nil {
			s.log.Warn("extensions config written but not published", observability.Err(err))
		}
	}
	if _, err := bus.Request[bus.CacheResetReply](ctx, s.deps.NC, s.deps.Names.CacheReset(), bus.CacheResetRequest{Reason: reason}); err != nil {
		s.log.Warn("extensions config written but the cache reset failed", observability.Err(err))
	}
}

// editError maps refusals of the config package to REST errors.
func editError(err error) error {
	var ee *configedit.EditError
	var pe *launchpolicy.Error
	switch {
	case errors.As(err, &pe):
		return &bus.Error{Code: bus.CodeInvalidRequest, Message: pe.Message, Details: details(pe.Server, pe.Field, pe.Value)}
	case errors.As(err, &ee):
		e := &bus.Error{Code: bus.CodeInvalidRequest, Message: ee.Message, Details: details(ee.Server, ee.Field, "")}
		switch ee.Kind {
		case configedit.EditNotFound:
			e.Code = bus.CodeNotFound
		case configedit.EditSchema:
			return &statusError{status: http.StatusUnprocessableEntity, err: e}
		}
		return e
	default:
		return bus.Wrap(bus.CodeInternal, err, "Failed to update MCP configuration")
	}
}

func details(server, field, value string) map[string]any {
	d := map[string]any{}
	if server != "" {
		d["server"] = server
	}
	if field != "" {
		d["field"] = field
	}
	if value != "" {
		d["value"] = value
	}
	if len(d) == 0 {
		return nil
	}
	return d
}

func unprocessable(msg string) error {
	return &statusError{status: http.StatusUnprocessableEntity, err: bus.Errorf(bus.CodeInvalidRequest, "%s", msg)}
}
