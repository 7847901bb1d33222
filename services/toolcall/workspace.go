package toolcall

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// scopePart is what a user or thread id may look like when it names a
// directory: no separators, no dots-only names.
var scopePart = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.@-]{0,127}$`)

func scopeIDs(req bus.ToolsCallRequest) (user, thread string, err error) {
	user, thread = req.UserID, req.ThreadID
	if user == "" {
		user = "default"
	}
	if thread == "" {
		thread = "default"
	}
	if !scopePart.MatchString(user) {
		return "", "", bus.Errorf(bus.CodeInvalidRequest, "user_id has characters that are not allowed")
	}
	if !scopePart.MatchString(thread) {
		return "", "", bus.Errorf(bus.CodeInvalidRequest, "thread_id has characters that are not allowed")
	}
	return user, thread, nil
}

// sessionTarget picks the pool key and, for stdio, the working directory and
// environment of the child.
func (s *Service) sessionTarget(srv *config.Server, req bus.ToolsCallRequest) (sessionKey, string, map[string]string, error) {
	if srv.Type != config.TransportStdio {
		return sessionKey{server: srv.Name, scope: "http"}, "", nil, nil
	}
	user, thread, err := scopeIDs(req)
	if err != nil {
		return sessionKey{}, "", nil, err
	}
	key := sessionKey{server: srv.Name, scope: user + ":" + thread}
	if srv.Cwd != "" {
		if err := srv.ValidateCwd(); err != nil {
			return sessionKey{}, "", nil, bus.Wrap(bus.CodeConfigError, err, err.Error())
		}
		return key, srv.Cwd, srv.Env, nil
	}
	dir, env, err := s.threadWorkspace(srv, user, thread)
	return key, dir, env, err
}

// threadWorkspace creates <root>/users/<user>/threads/<thread>/user-data/workspace
// and its private temp directory, and points TMPDIR, TMP and TEMP there
// unless the operator set them.
func (s *Service) threadWorkspace(srv *config.Server, user, thread string) (string, map[string]string, error) {
	root, err := filepath.Abs(s.cfg.WorkspaceRoot)
	if err != nil {
		return "", nil, bus.Wrap(bus.CodeInternal, err, "cannot resolve the workspace root")
	}
	dir := filepath.Join(root, "users", user, "threads", thread, "user-data", "workspace")
	tmp := filepath.Join(dir, ".mcp", "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", nil, bus.Wrap(bus.CodeInternal, err, fmt.Sprintf("cannot create the thread workspace for MCP server '%s'", srv.Name))
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", nil, bus.Wrap(bus.CodeInternal, err, "cannot secure the thread temp directory")
	}
	env := make(map[string]string, len(srv.Env)+3)
	for k, v := range srv.Env {
		env[k] = v
	}
	for _, k := range []string{"TMPDIR", "TMP", "TEMP"} {
		if _, set := env[k]; !set {
			env[k] = tmp
		}
	}
	return dir, env, nil
}
