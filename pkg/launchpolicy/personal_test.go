package launchpolicy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// githubSpec and fsSpec are the launch specs of these tests.
var (
	githubSpec = config.LaunchSpec{Name: "github", Command: "npx",
		Args: []string{"-y", "@modelcontextprotocol/server-github@2025.4.8"}, UserEnv: []string{"GITHUB_PERSONAL_ACCESS_TOKEN"},
		Env: map[string]string{"npm_config_cache": "/var/cache/npm"}}
	fsSpec = config.LaunchSpec{Name: "filesystem", Command: "npx",
		Args:     []string{"-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "{paths}"},
		UserArgs: map[string]config.UserArg{"paths": {Pattern: `/[A-Za-z0-9/_.-]*`, Min: 1, Max: 3}}}
	modeSpec = config.LaunchSpec{Name: "mode", Command: "/opt/srv/bin/server",
		Args:     []string{"{mode}", "--stdio"},
		UserArgs: map[string]config.UserArg{"mode": {Values: []string{"--read-only", "--verbose"}, Max: 2}}}
)

func personal(t *testing.T, o PersonalOptions) *Personal {
	t.Helper()
	p, err := NewPersonal(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// on turns personal stdio on with specs, unisolated (most tests are about
// the policy, not the uid).
func on(specs ...config.LaunchSpec) PersonalOptions {
	return PersonalOptions{Keyed: true, Unisolated: true, Settings: config.PersonalConnections{Stdio: true, LaunchSpecs: specs}}
}

func stdio(command string, args []string, env map[string]string) *config.Server {
	return &config.Server{Name: "s", Type: config.TransportStdio, Command: command, Args: args, Env: env}
}

func TestPersonalMatchesLaunchSpecsExactly(t *testing.T) {
	t.Parallel()
	p := personal(t, on(githubSpec, fsSpec, modeSpec))
	fs := []string{"-y", "@modelcontextprotocol/server-filesystem@2025.8.21"}
	for _, tc := range []struct {
		name    string
		srv     *config.Server
		spec    string // "" : refused
		field   string
		value   string
		message string
	}{
		{name: "github", srv: stdio("npx", githubSpec.Args, map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}), spec: "github"},
		{name: "fs one path", srv: stdio("npx", append(fs, "/data"), nil), spec: "filesystem"},
		{name: "fs three paths", srv: stdio("npx", append(fs, "/a", "/b", "/c"), nil), spec: "filesystem"},
		{name: "values", srv: stdio("/opt/srv/bin/server", []string{"--read-only", "--verbose", "--stdio"}, nil), spec: "mode"},
		{name: "no value", srv: stdio("/opt/srv/bin/server", []string{"--stdio"}, nil), spec: "mode"},
		{name: "fs no path (min 1)", srv: stdio("npx", fs, nil), field: "args"},
		{name: "fs four paths", srv: stdio("npx", append(fs, "/a", "/b", "/c", "/d"), nil), field: "args"},
		{name: "fs flag in place", srv: stdio("npx", append(fs, "-rf"), nil), field: "args"},
		{name: "fs relative path", srv: stdio("npx", append(fs, "../x"), nil), field: "args"},
		{name: "other version", srv: stdio("npx", []string{"-y", "@modelcontextprotocol/server-github@latest"}, nil), field: "args",
			message: `allowed: npx "-y" "@modelcontextprotocol/server-github@2025.4.8"; npx "-y" "@modelcontextprotocol/server-filesystem@2025.8.21" {paths: 1..3}`},
		{name: "npx sh", srv: stdio("npx", []string{"sh", "-c", "id"}, nil), field: "args"},
		{name: "npx node -e", srv: stdio("npx", []string{"node", "-e", "1"}, nil), field: "args"},
		{name: "npx bash", srv: stdio("npx", []string{"bash"}, nil), field: "args"},
		{name: "extra arg", srv: stdio("npx", append(githubSpec.Args, "x"), nil), field: "args"},
		{name: "value not listed", srv: stdio("/opt/srv/bin/server", []string{"--eval", "--stdio"}, nil), field: "args"},
		{name: "command", srv: stdio("sh", []string{"-c", "id"}, nil), field: "command", value: "sh",
			message: "personal MCP server 's' command 'sh' is not in any launch spec of this deployment (personal_connections.launch_specs: github, filesystem, mode)"},
		{name: "command path", srv: stdio("/usr/bin/npx", githubSpec.Args, nil), field: "command", value: "/usr/bin/npx"},
		{name: "npm_config_call", srv: stdio("npx", githubSpec.Args, map[string]string{"npm_config_call": "id"}), field: "env", value: "npm_config_call",
			message: "personal MCP server 's' sets environment variable 'npm_config_call', which changes what runs; personal connections may not set it"},
		{name: "npm_config_call without args", srv: stdio("npx", nil, map[string]string{"npm_config_call": "id"}), field: "env", value: "npm_config_call"},
		{name: "spec env not overridable", srv: stdio("npx", githubSpec.Args, map[string]string{"npm_config_cache": "/tmp"}), field: "env", value: "npm_config_cache"},
		{name: "not in user_env", srv: stdio("npx", githubSpec.Args, map[string]string{"OTHER": "1"}), field: "env", value: "OTHER",
			message: "launch spec 'github' does not permit (permitted: GITHUB_PERSONAL_ACCESS_TOKEN)"},
	} {
		l, err := p.Check(tc.srv)
		if tc.spec != "" {
			if err != nil || l.Spec != tc.spec {
				t.Errorf("%s: %+v %v, want spec %s", tc.name, l, err, tc.spec)
			}
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Server != "s" || pe.Field != tc.field || pe.Value != tc.value {
			t.Errorf("%s: %v (%+v), want a refusal of %s %q", tc.name, err, pe, tc.field, tc.value)
			continue
		}
		if tc.message != "" && !strings.Contains(pe.Message, tc.message) {
			t.Errorf("%s: message %q, want %q", tc.name, pe.Message, tc.message)
		}
		if strings.Contains(pe.Message, "ghp_x") {
			t.Errorf("%s: message carries a value: %q", tc.name, pe.Message)
		}
	}
	// Non-stdio servers are not this policy's.
	if l, err := p.Check(&config.Server{Name: "h", Type: config.TransportHTTP, URL: "https://x"}); l != nil || err != nil {
		t.Errorf("http server: %+v %v", l, err)
	}
}

func TestPersonalLaunchEnvironment(t *testing.T) {
	t.Parallel()
	o := on(githubSpec)
	o.Settings.Path = "/opt/node/bin:/usr/bin"
	o.WorkspaceRoot = t.TempDir()
	p := personal(t, o)
	l, err := p.Launch("alice", stdio("npx", githubSpec.Args, map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}))
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := p.WorkspaceDir("alice")
	want := map[string]string{"PATH": "/opt/node/bin:/usr/bin", "HOME": dir, "TMPDIR": dir + "/tmp", "TMP": dir + "/tmp", "TEMP": dir + "/tmp",
		"npm_config_cache": "/var/cache/npm", "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_x"}
	if len(l.Env) != len(want) {
		t.Errorf("env %v, want %v", l.Env, want)
	}
	for k, v := range want {
		if l.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, l.Env[k], v)
		}
	}
	if l.Dir != dir || filepath.Dir(dir) != filepath.Join(o.WorkspaceRoot, "personal") || l.RunAs != nil {
		t.Errorf("launch %+v, want dir %s and no run-as", l, dir)
	}
	if fi, err := os.Stat(filepath.Join(dir, "tmp")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("tmp: %v %v", fi, err)
	}
	if other, _ := p.WorkspaceDir("bob"); other == dir {
		t.Error("alice and bob share a workspace")
	}
}

func TestPersonalOffAndKeyless(t *testing.T) {
	t.Parallel()
	srv := stdio("npx", githubSpec.Args, nil)
	off := on(githubSpec)
	off.Settings.Stdio = false
	keyless := on(githubSpec)
	keyless.Keyed = false
	for _, tc := range []struct {
		o    PersonalOptions
		want string
	}{
		{PersonalOptions{}, "personal_connections.stdio is false"},
		{off, "personal_connections.stdio is false"},
		{keyless, "without API keys (api.keys is empty)"},
	} {
		p := personal(t, tc.o)
		_, err := p.Check(srv)
		var pe *Error
		if p.Enabled() || !errors.As(err, &pe) || pe.Field != "type" || !strings.Contains(pe.Message, tc.want) {
			t.Errorf("%+v: %v, want refused: %s", tc.o, err, tc.want)
		}
	}
}

func TestNewPersonalRefusesUnsafeSpecs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec config.LaunchSpec
		want string
	}{
		{config.LaunchSpec{Name: "a", Command: "npx", UserEnv: []string{"npm_config_call"}}, "personal_connections.launch_specs[0].user_env[0]: users may never set npm_config_call"},
		{config.LaunchSpec{Name: "a", Command: "npx", UserEnv: []string{"LD_PRELOAD"}}, "user_env[0]: users may never set LD_PRELOAD"},
		{config.LaunchSpec{Name: "a", Command: "npx", UserEnv: []string{"PATH"}}, "users may never set PATH"},
		{config.LaunchSpec{Name: "a", Command: "npx", Env: map[string]string{"T": "x"}, UserEnv: []string{"T"}}, "T is also set in env"},
		{config.LaunchSpec{Name: "a", Command: "npx", Args: []string{"{p}"}, UserArgs: map[string]config.UserArg{"p": {Pattern: "("}}}, "user_args.p.pattern"},
	} {
		o := on(tc.spec)
		if _, err := NewPersonal(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestRefusedEnv(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"npm_config_call", "NPM_CONFIG_PREFIX", "NODE_OPTIONS", "node_path", "PYTHONPATH", "PYTHONSTARTUP", "UV_INDEX_URL",
		"LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "PATH", "Path", "BASH_ENV", "ENV", "HOME", "BASH_FUNC_x%%", "XDG_CONFIG_HOME", "GIT_SSH_COMMAND", "OPENSSL_CONF", " ld_audit "} {
		if !RefusedEnv(name) {
			t.Errorf("%s is not refused", name)
		}
	}
	for _, name := range []string{"GITHUB_PERSONAL_ACCESS_TOKEN", "API_KEY", "TOKEN", "BRAVE_API_KEY"} {
		if RefusedEnv(name) {
			t.Errorf("%s is refused", name)
		}
	}
}
