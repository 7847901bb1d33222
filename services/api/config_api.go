package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"syscall"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
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

// putConfig replaces the server set (reference §1.5), validates the
// servers the write changes, and commits it (writeConfig).
func (s *Service) putConfig(c echo.Context) error {
	var body putConfigBody
	if err := decodeBody(c, &body); err != nil {
		return err
	}
	if len(body.MCPServers) == 0 || bytes.Equal(bytes.TrimSpace(body.MCPServers), []byte("null")) {
		return unprocessable("mcp_servers is required: send {\"mcp_servers\": {name: server}}")
	}
	return s.writeConfig(c, "put_config", "config updated", true, func(cur []byte) ([]byte, error) {
		return configedit.ReplaceServers(cur, body.MCPServers)
	})
}

// patchConfig changes only the enabled flag of one server. Enabling
// validates that server; disabling never validates.
func (s *Service) patchConfig(c echo.Context) error {
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
	return s.writeConfig(c, "patch_config", "config server toggled", *body.Enabled, func(cur []byte) ([]byte, error) {
		return configedit.SetServerEnabled(cur, body.ServerName, *body.Enabled)
	})
}

// writeConfig is the one write path of the config API. Under the file lock
// it builds the candidate with edit, validates the servers the write
// changes unless judge is false (disabling a server never validates it; a
// server left as it was is never judged again, so one stale entry cannot
// block every edit), refuses a change that needs a restart
// (409, restartRefusal), writes the file and publishes it to the KV
// bucket. It answers 200 only once the publication is durable; when it
// fails the file is put back and the answer is 503 with a retry hint, so
// the file and the KV bucket always agree. A file the service cannot write
// is refused with 409 naming it (readOnlyRefusal).
func (s *Service) writeConfig(c echo.Context, action, reason string, judge bool, edit func(cur []byte) ([]byte, error)) error {
	path, err := s.configPath()
	if err != nil {
		return err
	}
	if why := configedit.Writable(path); why != "" {
		return readOnlyRefusal(path, why)
	}
	ctx := c.Request().Context()
	var written, before []byte
	err = configedit.EditFileCommit(path, func(cur []byte, _ bool) ([]byte, error) {
		before = cur
		next, err := edit(cur)
		if err != nil {
			return nil, err
		}
		changed, err := configedit.ChangedServers(cur, next)
		if err != nil {
			return nil, err
		}
		if !judge {
			changed = nil
		}
		if err := s.validateCandidate(path, next, changed); err != nil {
			return nil, err
		}
		if err := s.restartRefusal(ctx, path, next, changed); err != nil {
			return nil, err
		}
		written = next
		return next, nil
	}, func() error {
		return s.commitConfig(ctx)
	})
	if err != nil {
		return editError(err)
	}
	s.auditConfig(c, action, before, written)
	s.resetCaches(ctx, reason)
	return s.replyMasked(c, written)
}

// commitConfig publishes the written file to the KV bucket and waits for
// the bucket's acknowledgement; a failure is a 503 the caller may retry.
func (s *Service) commitConfig(ctx context.Context) error {
	if s.pub == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.publish(ctx, true); err != nil {
		return &statusError{status: http.StatusServiceUnavailable, err: bus.Wrap(bus.CodeUnavailable, err,
			"the configuration change could not be stored in the NATS KV bucket, so no service would see it; nothing was changed (the file is as it was). Retry when NATS is reachable")}
	}
	return nil
}

// readOnlyRefusal is the answer to a write where the config file cannot
// be written: the file comes from elsewhere (a Kubernetes ConfigMap, a
// read-only mount), so that is where it is changed.
func readOnlyRefusal(path, why string) error {
	return &statusError{status: http.StatusConflict, err: &bus.Error{Code: bus.CodeConfigError,
		Message: "the MCP configuration file " + path + " cannot be written (" + why + "); the config API is read-only here. Change the file where it comes from (for example its ConfigMap); mcpbus publishes the new content when the file changes",
		Details: map[string]any{"file": path}}}
}

// restartRefusal refuses (409) a write that changes the restart fields of
// a task-enabled server (config.TaskDrifts against the deployment's
// startup baseline in the KV bucket): its durable tasks in flight depend on
// the definition they were submitted with. Drift the write does not cause
// (an earlier hand edit) is not its concern.
func (s *Service) restartRefusal(ctx context.Context, path string, next []byte, changed []string) error {
	cand, err := config.ParseExtensions(path, next)
	if err != nil || !slices.ContainsFunc(changed, func(name string) bool {
		srv := cand.Server(name)
		return srv != nil && srv.Enabled && srv.TaskEnabled()
	}) {
		return nil // no changed task server (a bad document is validateCandidate's)
	}
	rec, err := sharedstate.CurrentBaseline(ctx, s.deps.KV)
	if err != nil {
		return &statusError{status: http.StatusServiceUnavailable, err: bus.Wrap(bus.CodeUnavailable, err,
			"the deployment's startup configuration could not be read from the NATS KV bucket; nothing was changed. Retry when NATS is reachable")}
	}
	if rec == nil {
		return nil
	}
	base, err := config.ParseExtensions(rec.Path, rec.Raw)
	if err != nil {
		return nil // a baseline that no longer parses protects nothing
	}
	for _, d := range config.TaskDrifts(base, cand) {
		if !slices.Contains(changed, d.Server) {
			continue
		}
		return &statusError{status: http.StatusConflict, err: &bus.Error{Code: bus.CodeConfigError,
			Message: d.Message() + ". Durable tasks in flight use the definition they were submitted with, so this change is refused here: edit the file and restart mcpbus, or disable the server first",
			Details: map[string]any{"server": d.Server, "fields": d.Fields, "restart_required": true}}}
	}
	return nil
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
// "$VAR" is judged by its placeholder, not by this host's environment),
// with the rules every service applies to the file (config.
// ParseExtensionsAsWritten: schema, URLs, header names, misspelt keys,
// interceptor names; 422) plus header values and reserved names (400), for
// the servers named in changed only: the API edits nothing else, and what
// it leaves as it was is not judged again.
func (s *Service) validateCandidate(path string, data []byte, changed []string) error {
	ext, err := config.ParseExtensionsAsWritten(path, data)
	if err != nil {
		return &configedit.EditError{Kind: configedit.EditSchema, Message: "Invalid MCP configuration: " + documentProblem(err)}
	}
	for _, p := range ext.Problems {
		if p.Severity != config.SeverityError || !slices.Contains(changed, p.Server) {
			continue
		}
		return &configedit.EditError{Kind: configedit.EditSchema, Server: p.Server, Field: p.Field, Message: "Invalid MCP configuration: " + problemText(p)}
	}
	for _, name := range changed {
		if err := configedit.CheckServerValues(data, name); err != nil {
			return err
		}
		if bus.PersonalRuntimeNamePattern.MatchString(name) {
			return &configedit.EditError{Kind: configedit.EditInvalid, Server: name,
				Message: "MCP server name '" + name + "' is reserved for personal connections (p_ followed by 12 hex digits); choose another name."}
		}
	}
	return nil
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

// resetCaches asks the discovery replicas to reset after a committed
// write. The change is already durable in the KV bucket, which every
// replica follows, so a failed reset is logged, not returned.
func (s *Service) resetCaches(ctx context.Context, reason string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	if _, err := bus.Request[bus.CacheResetReply](ctx, s.deps.NC, s.deps.Names.CacheReset(), bus.CacheResetRequest{Reason: reason}); err != nil {
		s.log.Warn("extensions config published but the cache reset failed", observability.Err(err))
	}
}

// editError maps refusals of the config package to REST errors.
func editError(err error) error {
	var ee *configedit.EditError
	var pe *launchpolicy.Error
	var se *statusError
	var we *configedit.WriteError
	switch {
	case errors.As(err, &pe): // personal connections
		return &bus.Error{Code: bus.CodeInvalidRequest, Message: pe.Message, Details: details(pe.Server, pe.Field, pe.Value)}
	case errors.As(err, &se):
		return se
	case errors.As(err, &we) && (errors.Is(we.Err, fs.ErrPermission) || errors.Is(we.Err, syscall.EROFS)):
		return readOnlyRefusal(we.Path, we.Err.Error())
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
