package toolcall_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// hostPidWithEnv returns the pid, as this process sees it, of the running
// process whose environment holds kv, or 0.
func hostPidWithEnv(kv string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains("\x00"+string(b)+"\x00", "\x00"+kv+"\x00") {
			return pid
		}
	}
	return 0
}

// probeFiles has the fake read, list and write paths and returns what each
// operation gave ("ok: ..." or the error), keyed "<op> <path>".
func probeFiles(t *testing.T, e *env, tool, user string, ops map[string][]string) map[string]string {
	t.Helper()
	args, _ := json.Marshal(ops)
	r := e.mustCall(t, bus.Call{Tool: tool + "_probe", UserID: user, ThreadID: "t1", Arguments: args})
	out := map[string]string{}
	if err := json.Unmarshal(r.StructuredContent, &out); err != nil {
		t.Fatalf("probe: %s: %v", r.StructuredContent, err)
	}
	return out
}

// TestPersonalStdioUsersCannotReachEachOther: the attack of a user whose
// launch spec can read files. bob's personal child holds a token in its
// environment and lives in its workspace; alice's child tries to read bob's
// child's /proc/<pid>/environ, to list bob's workspace and to plant a
// .npmrc in it, and to read a deployment child's /proc/<pid>/cmdline. All
// are refused: each user's children run under a uid of their own (from
// personal_connections.uid_range) in a PID namespace of their own, and see
// no other process at all. alice can still do all of it in her own
// workspace, so the refusals are not the probe failing.
func TestPersonalStdioUsersCannotReachEachOther(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("isolation needs root (running as uid %d)", os.Geteuid())
	}
	root := testkit.SharedTempDir(t) // the children's uids must reach their workspaces
	personal := fakePersonal(true)
	personal.Settings.UIDRange = config.UIDRange{First: 3_200_000, Count: 1000}
	deployed, _ := stdioServer(t, `"DEPLOY_MARK": "deployed-`+t.Name()+`"`)
	e, a := startPersonalWith(t, options{cfg: cfgOf(map[string]string{"fake": deployed}, ""), catalog: fakeTools("fake"),
		personal: personal, workspace: root}, nil)

	secret := "bob-token-" + strconv.Itoa(os.Getpid())
	def := func(mark string) string {
		return fmt.Sprintf(`{"type": "stdio", "command": %q, "env": {"TOOLCALL_FAKE": "stdio", "FAKE_MARK": %q}}`, fakeCommand, mark)
	}
	bobTool := a.put(t, "bob", "notes", def(secret))
	aliceTool := a.put(t, "alice", "notes", def("alice"))
	bob := who(t, e.mustCall(t, bus.Call{Tool: bobTool + "_whoami", UserID: "bob", ThreadID: "t1"}))
	alice := who(t, e.mustCall(t, bus.Call{Tool: aliceTool + "_whoami", UserID: "alice", ThreadID: "t1"}))
	deploy := who(t, e.mustCall(t, bus.Call{Tool: "fake_whoami", ThreadID: "t1"}))

	if alice.UID == bob.UID || alice.UID < 3_200_000 || bob.UID < 3_200_000 || alice.GID != alice.UID || bob.GID != bob.UID {
		t.Errorf("alice runs as %d:%d and bob as %d:%d, want distinct uids of the range", alice.UID, alice.GID, bob.UID, bob.GID)
	}
	if alice.Pid != 1 || bob.Pid != 1 {
		t.Errorf("personal children see themselves as pid %d and %d, want 1 (their own PID namespaces)", alice.Pid, bob.Pid)
	}
	bobPid := hostPidWithEnv("FAKE_MARK=" + secret)
	if bobPid == 0 {
		t.Fatal("bob's child is not running")
	}
	bobHome := bob.Cwd
	attack := probeFiles(t, e, aliceTool, "alice", map[string][]string{
		"read":  {fmt.Sprintf("/proc/%d/environ", bobPid), fmt.Sprintf("/proc/%d/cmdline", deploy.Pid), fmt.Sprintf("/proc/%d/cmdline", os.Getpid()), filepath.Join(bobHome, "tmp")},
		"list":  {bobHome},
		"write": {filepath.Join(bobHome, ".npmrc")},
	})
	t.Logf("alice's attack: %q", attack)
	for op, got := range attack {
		if strings.HasPrefix(got, "ok") {
			t.Errorf("alice's child: %s succeeded: %q", op, got)
		}
		if strings.Contains(got, secret) || strings.Contains(got, "DEPLOY_MARK") {
			t.Errorf("alice's child: %s leaked %q", op, got)
		}
	}
	if _, err := os.Stat(filepath.Join(bobHome, ".npmrc")); err == nil {
		t.Error("alice planted a .npmrc in bob's workspace")
	}
	own := probeFiles(t, e, aliceTool, "alice", map[string][]string{
		"read":  {"/proc/1/environ"},
		"write": {filepath.Join(alice.Cwd, ".npmrc")},
		"list":  {alice.Cwd},
	})
	for op, got := range own {
		if !strings.HasPrefix(got, "ok") {
			t.Errorf("alice's child in its own namespace and workspace: %s: %q, want it to work", op, got)
		}
	}
}
