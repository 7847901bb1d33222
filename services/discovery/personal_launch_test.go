package discovery_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/launchpolicy"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/discovery"
)

// TestPersonalStdioDiscoveryAppliesTheLaunchPolicy: issue 11 item 2. A
// personal stdio definition that reached the store (saved before the policy
// tightened) is not started by discovery when the current policy refuses
// it — personal stdio off (the default), or on but the command line not on
// a launch spec — and shows as a failed server naming the reason. One that
// matches a spec starts in its owner's workspace under workspace.root.
func TestPersonalStdioDiscoveryAppliesTheLaunchPolicy(t *testing.T) {
	t.Parallel()
	demoBin := testkit.DemoServer(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	cwdFile := filepath.Join(dir, "cwd")
	attack := fmt.Sprintf(`{"command": "sh", "args": ["-c", "touch %s; exec %s"]}`, marker, demoBin)
	npxSh := fmt.Sprintf(`{"command": "npx", "args": ["sh", "-c", "touch %s; exec %s"]}`, marker, demoBin)
	script := fmt.Sprintf("pwd > %s; exec %s", cwdFile, demoBin)
	allowed := fmt.Sprintf(`{"command": "/bin/sh", "args": ["-c", %q]}`, script)
	root := t.TempDir()
	on := launchpolicy.PersonalOptions{Keyed: true, Unisolated: true, WorkspaceRoot: root, Settings: config.PersonalConnections{
		Stdio: true, Path: "/usr/bin:/bin", LaunchSpecs: []config.LaunchSpec{
			{Name: "demo", Command: "/bin/sh", Args: []string{"-c", script}},
			{Name: "everything", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything@2025.9.25"}},
		}}}

	for _, tc := range []struct {
		name     string
		personal launchpolicy.PersonalOptions
		def      string
		want     string
	}{
		{"off by default", launchpolicy.PersonalOptions{}, attack, "personal_connections.stdio is false"},
		{"off by default, allowed line", launchpolicy.PersonalOptions{}, allowed, "personal_connections.stdio is false"},
		{"not a spec command", on, attack, "command 'sh' is not in any launch spec"},
		{"npx sh", on, npxSh, "args do not match a launch spec for 'npx'"},
	} {
		b := testkit.StartBus(t)
		api := newPersonalAPI(t, b).serve()
		rt := api.put("alice", "notes", tc.def)
		b.PublishExtensions(t, cfgOf())
		runService(t, b, discovery.Config{NoWarmUp: true, Personal: tc.personal})
		r := listAs(t, b, "alice")
		f, ok := failure(r, rt)
		if !ok || !strings.Contains(f.Error, tc.want) {
			t.Errorf("%s: failed servers %+v, want %s refused with %q", tc.name, r.FailedServers, rt, tc.want)
		}
		if len(withPrefix(r, rt)) != 0 {
			t.Errorf("%s: refused connection has tools %v", tc.name, withPrefix(r, rt))
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("discovery ran a refused personal stdio server (marker: %v)", err)
	}
	if _, err := os.Stat(cwdFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("discovery ran a personal stdio server with personal stdio off (%v)", err)
	}

	b := testkit.StartBus(t)
	api := newPersonalAPI(t, b).serve()
	rt := api.put("alice", "notes", allowed)
	b.PublishExtensions(t, cfgOf())
	runService(t, b, discovery.Config{NoWarmUp: true, Personal: on})
	r := listAs(t, b, "alice")
	if len(withPrefix(r, rt)) == 0 {
		t.Fatalf("the allowed connection has no tools: %+v", r.FailedServers)
	}
	got, err := os.ReadFile(cwdFile)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := launchpolicy.NewPersonal(on)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := policy.WorkspaceDir("alice")
	if cwd := strings.TrimSpace(string(got)); cwd != want || filepath.Dir(cwd) != filepath.Join(root, "personal") {
		t.Errorf("personal stdio discovery ran in %q, want alice's workspace %q", cwd, want)
	}
}
