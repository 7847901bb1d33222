package config

import (
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/pinning"
)

// TestVirtualServersValidated: every bad field of virtual_servers is an
// error naming the field; a key or NATS identity naming a set config.yaml
// does not define is a warning (the admin API may create it). One entry
// alone gets the same checks and messages, its fields named relative to
// it.
func TestVirtualServersValidated(t *testing.T) {
	clearSettingsEnv(t)
	p := writeFile(t, t.TempDir(), "config.yaml", `nats:
  bind_identity: true
  identities:
    - {user_id: w, virtual_servers: [ghost]}
api:
  keys:
    - {sha256: "`+sha64+`", user_id: a, role: user, virtual_servers: [ghost]}
virtual_servers:
  - name: "bad name"
    servers: []
    tools: ["[a-"]
    overrides:
      x: {name: "no spaces", routing: {mode: maybe, priority: 200}}
    quotas:
      - {tools: [say], calls: 3}
      - {tools: [say]}
    pinning: sometimes
  - name: ok
    servers: [demo]
  - name: ok
    servers: [demo]
`)
	s, err := readSettings(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	ps := s.Validate()
	for _, want := range []struct{ field, msg string }{
		{"virtual_servers[0].name", "letters, digits"},
		{"virtual_servers[0].servers", "at least one server"},
		{"virtual_servers[0].tools[0]", "glob"},
		{"virtual_servers[0].overrides.x.name", "letters, digits"},
		{"virtual_servers[0].overrides.x.routing.mode", "off or prefer"},
		{"virtual_servers[0].overrides.x.routing.priority", "between 0 and 100"},
		{"virtual_servers[0].quotas[0].interval_seconds", "between 1 and 86400"},
		{"virtual_servers[0].quotas[1]", "neither calls nor concurrent"},
		{"virtual_servers[0].pinning", "off, log, require_approval or block"},
		{"virtual_servers[2].name", "repeats virtual_servers[1].name"},
	} {
		if !hasProblem(ps, SeverityError, want.field, want.msg) {
			t.Errorf("no error on %s (%q) in %v", want.field, want.msg, ps)
		}
		if rel, ok := strings.CutPrefix(want.field, "virtual_servers[0]."); ok {
			if one := ValidateVirtualServer(s.VirtualServers[0]); !hasProblem(one, SeverityError, rel, want.msg) {
				t.Errorf("ValidateVirtualServer: no error on %s (%q) in %v", rel, want.msg, one)
			}
		}
	}
	for _, f := range []string{"api.keys[0].virtual_servers[0]", "nats.identities[0].virtual_servers[0]"} {
		if !hasProblem(ps, SeverityWarning, f, `"ghost"`) || hasProblem(ps, SeverityError, f, `"ghost"`) {
			t.Errorf("want a warning, not an error, on %s naming ghost in %v", f, ps)
		}
	}
	if ps := ValidateVirtualServer(s.VirtualServers[1]); len(ps) != 0 {
		t.Errorf("a good entry has problems: %v", ps)
	}
}

const sha64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// A virtual server's pinning is a floor for the servers it lists, applied
// when config.yaml is loaded: the stricter of the server's own policy and
// the set's; a server no set lists keeps its own.
func TestVirtualServerPinningRaisesItsServers(t *testing.T) {
	clearSettingsEnv(t)
	p := writeFile(t, t.TempDir(), "config.yaml", `virtual_servers:
  - name: reviewed
    servers: [tickets, wiki]
    pinning: require_approval
  - name: loose
    servers: [wiki, files]
    pinning: log
`)
	s, err := LoadSettings(p, true, ReadEnv())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		srv  *Server
		want pinning.Policy
	}{
		{&Server{Name: "tickets"}, pinning.RequireApproval},
		{&Server{Name: "wiki"}, pinning.RequireApproval},                // the stricter of the two sets
		{&Server{Name: "files"}, pinning.Log},                           // raised from the default off
		{&Server{Name: "files", Pinning: pinning.Block}, pinning.Block}, // never lowered
		{&Server{Name: "other"}, pinning.Off},
	} {
		if got := s.Pinning.Policy(c.srv, false); got != c.want {
			t.Errorf("%s (own %q): policy %s, want %s", c.srv.Name, c.srv.Pinning, got, c.want)
		}
	}
}
