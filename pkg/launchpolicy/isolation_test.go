package launchpolicy

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// launchHelperEnv makes this test binary print what Launch answers and exit
// (TestPersonalRefusedWithoutIsolation runs it as nobody).
const launchHelperEnv = "LAUNCHPOLICY_LAUNCH_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(launchHelperEnv) == "1" {
		_, err := personalOrExit(isolatedOn(os.Getenv("WS"), githubSpec)).Launch("alice", stdio("npx", githubSpec.Args, nil))
		fmt.Print(err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func personalOrExit(o PersonalOptions) *Personal {
	p, err := NewPersonal(o)
	if err != nil {
		fmt.Print(err)
		os.Exit(1)
	}
	return p
}

// isolatedOn turns personal stdio on with specs and real isolation, the
// workspaces under root.
func isolatedOn(root string, specs ...config.LaunchSpec) PersonalOptions {
	o := on(specs...)
	o.Unisolated, o.WorkspaceRoot = false, root
	return o
}

func owner(t *testing.T, path string) (uint32, os.FileMode) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid, os.FileMode(st.Mode).Perm()
}

// TestPersonalUIDPerUser: as root, each user's children get a uid and gid
// of their own from uid_range, the same one every time (also for a new
// policy on the same workspace root, as another service would build), in
// namespaces of their own; the workspace is that uid's with mode 0700,
// all of it when it belonged to another uid before. When the range is
// full, the next user is refused, never given a uid already taken.
func TestPersonalUIDPerUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("needs root (uid %d)", os.Geteuid())
	}
	root := filepath.Join(testkit.SharedTempDir(t), "ws")
	o := isolatedOn(root, githubSpec)
	o.Settings.UIDRange = config.UIDRange{First: 3_100_000, Count: 2}
	srv := stdio("npx", githubSpec.Args, nil)

	// bob's workspace exists from before, owned by nobody.
	bobDir, _ := personal(t, o).WorkspaceDir("bob")
	if err := os.MkdirAll(filepath.Join(bobDir, ".config"), 0o755); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(bobDir, ".config", "npmrc")
	if err := os.WriteFile(planted, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bobDir, filepath.Dir(planted), planted} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}

	uids := map[string]uint32{}
	for _, u := range []string{"alice", "bob"} {
		l, err := personal(t, o).Launch(u, srv)
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if l.RunAs == nil || !l.Isolate || l.RunAs.UID != l.RunAs.GID || !o.Settings.UIDRange.Contains(int64(l.RunAs.UID)) {
			t.Fatalf("%s: run as %+v isolate %v, want a uid of the range, isolated", u, l.RunAs, l.Isolate)
		}
		uids[u] = l.RunAs.UID
		for _, d := range []string{l.Dir, filepath.Join(l.Dir, "tmp")} {
			if uid, mode := owner(t, d); uid != l.RunAs.UID || mode != 0o700 {
				t.Errorf("%s: %s owned by %d mode %o, want %d and 0700", u, d, uid, mode, l.RunAs.UID)
			}
		}
	}
	if uids["alice"] == uids["bob"] {
		t.Fatalf("alice and bob share uid %d", uids["alice"])
	}
	if uid, _ := owner(t, planted); uid != uids["bob"] {
		t.Errorf("a file of bob's old workspace is owned by %d, want bob's %d", uid, uids["bob"])
	}
	// A new policy (another service, a restart) gives the same uids.
	again := personal(t, o)
	for _, u := range []string{"bob", "alice"} {
		if l, err := again.Launch(u, srv); err != nil || l.RunAs.UID != uids[u] {
			t.Errorf("%s again: %+v %v, want uid %d", u, l, err, uids[u])
		}
	}
	_, err := again.Launch("carol", srv)
	if err == nil || !strings.Contains(err.Error(), "no free uid left in personal_connections.uid_range (2 from 3100000)") {
		t.Errorf("a third user in a range of two: %v, want refused", err)
	}
}

// TestPersonalRefusedWithoutIsolation: the policy run by an unprivileged
// uid (this test binary re-executed as nobody) refuses to launch a
// personal stdio server, naming the server and why, instead of running it
// under a shared uid.
func TestPersonalRefusedWithoutIsolation(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatalf("switches to nobody: needs root (uid %d)", os.Geteuid())
	}
	dir := testkit.SharedTempDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := testkit.SharedExecutable(t, dir, "helper.test", self)
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{launchHelperEnv + "=1", "WS=" + ws}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	want := "personal MCP server 's' cannot start: personal stdio servers run only isolated from other users (a uid of their own and their own PID namespace), and this service cannot isolate them: mcpbus runs as uid 65534, not root"
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("as nobody: %q, want %q", out, want)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("a refused launch prepared a workspace: %v", entries)
	}
}
