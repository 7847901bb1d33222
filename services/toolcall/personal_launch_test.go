package toolcall_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

// npxSpec is a launch spec for a real npm package: the user may add up to
// two paths.
var npxSpec = config.LaunchSpec{Name: "everything", Command: "npx",
	Args:     []string{"-y", "@modelcontextprotocol/server-everything@2025.9.25", "{paths}"},
	UserArgs: map[string]config.UserArg{"paths": {Pattern: `/[A-Za-z0-9/_.-]*`, Max: 2}}}

// TestPersonalStdioAttacksStoredBeforeThePolicyAreRefused: issue 11 item 1
// at call time. Definitions that bypassed the save check (stored before the
// policy tightened) — npx running sh, node -e or bash from npm's global bin,
// npm_config_call as an environment variable — are config_error naming the
// field, and nothing runs.
func TestPersonalStdioAttacksStoredBeforeThePolicyAreRefused(t *testing.T) {
	t.Parallel()
	e, a := startPersonalWith(t, options{cfg: emptyConfig, personal: fakePersonal(notRoot, npxSpec)}, nil)
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, tc := range []struct {
		name, def, field, value string
	}{
		{"npx-sh", fmt.Sprintf(`{"command": "npx", "args": ["sh", "-c", "touch %s; exec %s"]}`, marker, fakeCommand), "args", ""},
		{"npx-node", fmt.Sprintf(`{"command": "npx", "args": ["node", "-e", "require('fs').writeFileSync('%s', '')"]}`, marker), "args", ""},
		{"npx-bash", `{"command": "npx", "args": ["bash"]}`, "args", ""},
		{"npm-config-call", fmt.Sprintf(`{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2025.9.25"], "env": {"npm_config_call": "touch %s"}}`, marker), "env", "npm_config_call"},
		{"npm-config-upper", `{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2025.9.25"], "env": {"NPM_CONFIG_GLOBALCONFIG": "/tmp/x"}}`, "env", "NPM_CONFIG_GLOBALCONFIG"},
		{"path", fmt.Sprintf(`{"command": %q, "env": {"PATH": "/tmp"}}`, fakeCommand), "env", "PATH"},
		{"ld-preload", fmt.Sprintf(`{"command": %q, "env": {"LD_PRELOAD": "/tmp/x.so"}}`, fakeCommand), "env", "LD_PRELOAD"},
		{"flag-in-place", `{"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything@2025.9.25", "--eval"]}`, "args", ""},
		{"not-in-user-env", fmt.Sprintf(`{"command": %q, "env": {"TOOLCALL_FAKE": "stdio", "OTHER": "x"}}`, fakeCommand), "env", "OTHER"},
		{"other-command", `{"command": "sh", "args": ["-c", "id"]}`, "command", "sh"},
	} {
		rt := a.put(t, "alice", tc.name, tc.def)
		_, err := e.call(t, bus.Call{Tool: rt + "_echo", UserID: "alice"})
		be := wantCode(t, tc.name, err, bus.CodeConfigError)
		if !strings.Contains(be.Message, "personal MCP server '"+rt+"'") {
			t.Errorf("%s: message %q does not name the server", tc.name, be.Message)
		}
		want := map[string]string{"args": "args do not match", "command": "is not in any launch spec", "env": "environment variable '" + tc.value + "'"}[tc.field]
		if !strings.Contains(be.Message, want) {
			t.Errorf("%s: message %q, want it to contain %q", tc.name, be.Message, want)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused definition ran (marker: %v)", err)
	}
}

// TestPersonalStdioRefusedWithoutAPIKeys: key-less mode allows no personal
// stdio connection even with personal_connections.stdio on.
func TestPersonalStdioRefusedWithoutAPIKeys(t *testing.T) {
	t.Parallel()
	opts := fakePersonal(notRoot)
	opts.Keyed = false
	e, a := startPersonalWith(t, options{cfg: emptyConfig, personal: opts}, nil)
	def, rec := personalStdio(t, "")
	notes := a.put(t, "default", "notes", def)
	_, err := e.call(t, bus.Call{Tool: notes + "_echo", UserID: "default"})
	if be := wantCode(t, "key-less", err, bus.CodeConfigError); !strings.Contains(be.Message, "without API keys") {
		t.Errorf("message = %q", be.Message)
	}
	if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused server was started (record file: %v)", err)
	}
}

// TestPersonalStdioEnvironmentAndWorkspace: the child's environment is the
// spec's (PATH, HOME, TMPDIR/TMP/TEMP) plus the user's permitted variables
// and nothing of the gateway's; it runs in a per-user workspace under
// workspace.root, never the service's directory.
func TestPersonalStdioEnvironmentAndWorkspace(t *testing.T) {
	t.Parallel()
	e, a := startPersonal(t, emptyConfig, nil, nil, true)
	def, _ := personalStdio(t, `"FAKE_MARK": "m"`)
	cwd, _ := os.Getwd()
	var dirs []string
	for _, user := range []string{"alice", "bob"} {
		rt := a.put(t, user, "notes", def)
		w := who(t, e.mustCall(t, bus.Call{Tool: rt + "_whoami", UserID: user, ThreadID: "t1"}))
		keys := slices.Sorted(slices.Values(w.EnvKeys))
		want := []string{"FAKE_MARK", "FAKE_RECORD", "HOME", "PATH", "PWD", "TEMP", "TMP", "TMPDIR", "TOOLCALL_FAKE"}
		if !slices.Equal(keys, want) {
			t.Errorf("%s: child environment %v, want exactly %v", user, keys, want)
		}
		if filepath.Dir(w.Cwd) != filepath.Join(e.workspace, "personal") || w.Cwd == cwd {
			t.Errorf("%s: cwd %q, want a workspace under %s/personal", user, w.Cwd, e.workspace)
		}
		dirs = append(dirs, w.Cwd)
	}
	if dirs[0] == dirs[1] {
		t.Errorf("alice and bob share the workspace %s", dirs[0])
	}
}

// escape makes the fake start a grandchild that calls setsid and returns
// its pid, checking it left the server's process group and session.
func escape(t *testing.T, e *env, req bus.Call) int {
	t.Helper()
	server := who(t, e.mustCall(t, bus.Call{Tool: req.Tool + "_whoami", UserID: req.UserID, ThreadID: req.ThreadID})).Pid
	req.Tool += "_escape"
	r := e.mustCall(t, req)
	var out struct{ Pid int }
	if err := json.Unmarshal(r.StructuredContent, &out); err != nil || out.Pid == 0 {
		t.Fatalf("escape: %s %v", r.StructuredContent, err)
	}
	pgid, err := syscall.Getpgid(out.Pid)
	if err != nil || pgid == server {
		t.Fatalf("the grandchild %d did not leave the server's group %d (pgid %d, %v)", out.Pid, server, pgid, err)
	}
	return out.Pid
}

// TestSetsidGrandchildDiesWithItsSession: issue 11 item 8. A descendant
// that called setsid dies when its session is closed (deployment server)
// and when its personal connection is deleted.
func TestSetsidGrandchildDiesWithItsSession(t *testing.T) {
	t.Parallel()
	entry, _ := stdioServer(t, "")
	e, a := startPersonalWith(t, options{cfg: cfgOf(map[string]string{"fake": entry}, ""), catalog: fakeTools("fake"), personal: fakePersonal(notRoot)}, nil)

	deployed := escape(t, e, bus.Call{Tool: "fake", ThreadID: "t1"})
	body, _ := json.Marshal(toolcall.SessionsCloseRequest{Server: "fake"})
	if _, err := e.bus.NC.Request(toolcall.SubjectSessionsClose(e.bus.Names), body, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the setsid grandchild of a closed session to be gone", func() bool { return gone(deployed) })

	def, _ := personalStdio(t, "")
	rt := a.put(t, "alice", "notes", def)
	personal := escape(t, e, bus.Call{Tool: rt, UserID: "alice", ThreadID: "t1"})
	a.remove(t, "alice", "notes")
	testkit.Eventually(t, 10*time.Second, "the setsid grandchild of a deleted connection to be gone", func() bool { return gone(personal) })
}
