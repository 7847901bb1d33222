package config

import (
	"strings"
	"testing"
)

func TestPersonalConnectionsDefaults(t *testing.T) {
	t.Parallel()
	p := DefaultSettings().PersonalConnections
	if p.Stdio || len(p.LaunchSpecs) != 0 || p.Path != "/usr/local/bin:/usr/bin:/bin" || p.RunAs != nil || p.UIDRange != (UIDRange{First: 2_000_000_000, Count: 1_000_000}) {
		t.Fatalf("personal_connections defaults %+v", p)
	}
}

func TestLoadPersonalConnections(t *testing.T) {
	clearSettingsEnv(t)
	p := writeFile(t, t.TempDir(), "config.yaml", `
personal_connections:
  stdio: true
  uid_range: {first: 300000, count: 5000}
  launch_specs:
    - name: github
      command: npx
      args: ["-y", "@modelcontextprotocol/server-github@2025.4.8"]
      user_env: [GITHUB_PERSONAL_ACCESS_TOKEN]
    - name: filesystem
      command: npx
      args: ["-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "{paths}"]
      user_args:
        paths: {pattern: "/[A-Za-z0-9/_.-]*", min: 1, max: 8}
    - name: fetch
      command: /usr/local/bin/uvx
      args: ["mcp-server-fetch==2025.4.7", "{flags}"]
      user_args:
        flags: {values: ["--ignore-robots-txt"]}
      env: {UV_CACHE_DIR: /var/cache/uv}
`)
	s, err := LoadSettings(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	pc := s.PersonalConnections
	if !pc.Stdio || pc.UIDRange != (UIDRange{First: 300000, Count: 5000}) || len(pc.LaunchSpecs) != 3 || pc.Path != DefaultPersonalPath {
		t.Fatalf("got %+v", pc)
	}
	if ua := pc.LaunchSpecs[1].UserArgs["paths"]; ua.Min != 1 || ua.Max != 8 || ua.Pattern == "" {
		t.Fatalf("paths %+v", ua)
	}
	if ua := pc.LaunchSpecs[2].UserArgs["flags"]; ua.Max != 1 || len(ua.Values) != 1 {
		t.Fatalf("flags %+v (max defaults to 1)", ua)
	}
	bad := writeFile(t, t.TempDir(), "config.yaml", "personal_connections:\n  launch_specs:\n    - name: a\n      command: npx\n      shell: true\n")
	if _, err := LoadSettings(bad, true, ReadEnv()); err == nil || !strings.Contains(err.Error(), `unknown key "personal_connections.launch_specs[0].shell"`) {
		t.Fatalf("unknown key: %v", err)
	}
}

func TestValidatePersonalConnections(t *testing.T) {
	t.Parallel()
	spec := func(mutate func(*LaunchSpec)) func(*Settings) {
		return func(s *Settings) {
			ls := LaunchSpec{Name: "a", Command: "npx", Args: []string{"-y", "pkg@1", "{p}"}, UserArgs: map[string]UserArg{"p": {Pattern: "/.*"}}}
			mutate(&ls)
			s.PersonalConnections.LaunchSpecs = []LaunchSpec{ls}
		}
	}
	const f = "personal_connections.launch_specs[0]"
	for _, tc := range []struct {
		name   string
		mutate func(*Settings)
		field  string
		msg    string
	}{
		{"path empty", func(s *Settings) { s.PersonalConnections.Path = "" }, "personal_connections.path", "must not be empty"},
		{"path relative", func(s *Settings) { s.PersonalConnections.Path = "/usr/bin:bin" }, "personal_connections.path", `absolute directory, got "bin"`},
		{"shared uid", func(s *Settings) { s.PersonalConnections.RunAs = &RunAs{UID: 65534, GID: 65534} }, "personal_connections.run_as", "must not share one uid"},
		{"range system", func(s *Settings) { s.PersonalConnections.UIDRange.First = 0 }, "personal_connections.uid_range.first", "1000 or more"},
		{"range empty", func(s *Settings) { s.PersonalConnections.UIDRange.Count = 0 }, "personal_connections.uid_range.count", "1 or more"},
		{"range too high", func(s *Settings) { s.PersonalConnections.UIDRange = UIDRange{First: 1<<32 - 10, Count: 10} }, "personal_connections.uid_range", "must end at 4294967293"},
		{"range nobody", func(s *Settings) { s.PersonalConnections.UIDRange = UIDRange{First: 60000, Count: 10000} }, "personal_connections.uid_range", "65534"},
		{"name", spec(func(l *LaunchSpec) { l.Name = "a b" }), f + ".name", "letters, digits"},
		{"command empty", spec(func(l *LaunchSpec) { l.Command = "" }), f + ".command", "one executable"},
		{"command line", spec(func(l *LaunchSpec) { l.Command = "npx -y" }), f + ".command", "one executable"},
		{"command relative", spec(func(l *LaunchSpec) { l.Command = "bin/npx" }), f + ".command", "absolute path"},
		{"place undeclared", spec(func(l *LaunchSpec) { l.Args = append(l.Args, "{q}") }), f + ".args[3]", "{q}, which user_args does not describe"},
		{"place repeated", spec(func(l *LaunchSpec) { l.Args = append(l.Args, "{p}") }), f + ".args[3]", "repeats the place {p}"},
		{"place unused", spec(func(l *LaunchSpec) { l.Args = l.Args[:2] }), f + ".user_args.p", "not used as {p}"},
		{"pattern and values", spec(func(l *LaunchSpec) { l.UserArgs["p"] = UserArg{Pattern: "x", Values: []string{"y"}} }), f + ".user_args.p", "exactly one of pattern and values"},
		{"neither", spec(func(l *LaunchSpec) { l.UserArgs["p"] = UserArg{} }), f + ".user_args.p", "exactly one of pattern and values"},
		{"bad pattern", spec(func(l *LaunchSpec) { l.UserArgs["p"] = UserArg{Pattern: "("} }), f + ".user_args.p.pattern", "not a valid regular expression"},
		{"min max", spec(func(l *LaunchSpec) { l.UserArgs["p"] = UserArg{Pattern: "x", Min: 3, Max: 2} }), f + ".user_args.p", "0 <= min <= max <= 64"},
		{"max", spec(func(l *LaunchSpec) { l.UserArgs["p"] = UserArg{Pattern: "x", Max: 65} }), f + ".user_args.p", "max <= 64"},
		{"user env name", spec(func(l *LaunchSpec) { l.UserEnv = []string{"A=B"} }), f + ".user_env[0]", "variable name"},
		{"env name", spec(func(l *LaunchSpec) { l.Env = map[string]string{"": "x"} }), f + ".env", "invalid variable name"},
		{"duplicate", func(s *Settings) {
			s.PersonalConnections.LaunchSpecs = []LaunchSpec{{Name: "a", Command: "npx"}, {Name: "a", Command: "uvx"}}
		}, "personal_connections.launch_specs[1].name", "repeats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			tc.mutate(&s)
			ps := s.Validate()
			if len(ps) != 1 || ps[0].Field != tc.field || !strings.Contains(ps[0].Message, tc.msg) {
				t.Fatalf("want one error %q containing %q, got %v", tc.field, tc.msg, ps)
			}
		})
	}
}
