package toolcall

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/mcpclient"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// validScopePart reports whether a user or thread id may name a directory:
// 1 to 128 of [A-Za-z0-9_.@-], not starting with a dot (so no "." or "..")
// and no separators.
func validScopePart(s string) bool {
	if s == "" || len(s) > 128 || s[0] == '.' || s[0] == '@' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.', c == '@':
		default:
			return false
		}
	}
	return true
}

// stdioLaunch returns the stdio part of the spec of a new child of srv for
// user:thread. A personal connection (owner set) runs what the personal
// launch policy gives: the matched launch spec's command line, an
// environment built from the spec only, the owner's personal workspace, the
// owner's own uid and namespaces of the child's own; a refusal is logged. A deployment server runs in cwd when configured,
// else in the thread workspace, created here (on demand, when a session is
// created).
func (s *Service) stdioLaunch(srv *config.Server, owner, user, thread string) (mcpclient.Spec, error) {
	var spec mcpclient.Spec
	if owner != "" {
		l, err := s.policy.Launch(owner, srv)
		if err != nil {
			s.log.Warn("personal stdio server not started", observability.Server(srv.Name), slog.String(keyUser, owner), observability.Err(err))
			return spec, bus.WrapUser(bus.CodeConfigError, err, fmt.Sprintf("personal MCP server '%s' cannot be launched: its uid or workspace cannot be prepared", srv.Name))
		}
		if l == nil {
			return spec, bus.Errorf(bus.CodeInternal, "MCP server '%s' is not a stdio server", srv.Name)
		}
		l.Apply(&spec)
		return spec, nil
	}
	spec.Transport, spec.Command, spec.Args = srv.Type, srv.Command, srv.Args
	if srv.Cwd != "" {
		if err := srv.ValidateCwd(); err != nil {
			return spec, bus.WrapUser(bus.CodeConfigError, err, fmt.Sprintf("MCP server '%s': its configured cwd cannot be used", srv.Name))
		}
		spec.Dir, spec.Env = srv.Cwd, srv.Env
		return spec, nil
	}
	dir, env, err := s.threadWorkspace(srv, user, thread)
	spec.Dir, spec.Env = dir, env
	return spec, err
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
