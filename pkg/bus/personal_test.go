package bus_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

func TestPersonalRuntimeName(t *testing.T) {
	t.Parallel()
	a, err := bus.PersonalRuntimeName("alice", "gh", json.RawMessage(`{"type":"http","url":"http://u","headers":{"A":"1","B":"<2>"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bus.PersonalRuntimeNamePattern.MatchString(a) {
		t.Fatalf("runtime name %q does not match the pattern", a)
	}
	same, _ := bus.PersonalRuntimeName("alice", "gh", json.RawMessage("{\n \"headers\": {\"B\": \"<2>\", \"A\": \"1\"},\n \"url\": \"http://u\", \"type\": \"http\"}"))
	if same != a {
		t.Fatalf("formatting changed the name: %s vs %s", same, a)
	}
	for _, other := range [][3]string{
		{"bob", "gh", `{"type":"http","url":"http://u","headers":{"A":"1","B":"<2>"}}`},
		{"alice", "gh2", `{"type":"http","url":"http://u","headers":{"A":"1","B":"<2>"}}`},
		{"alice", "gh", `{"type":"http","url":"http://u","headers":{"A":"2","B":"<2>"}}`},
	} {
		n, _ := bus.PersonalRuntimeName(other[0], other[1], json.RawMessage(other[2]))
		if n == a {
			t.Fatalf("%v gives the same runtime name", other)
		}
	}
	if _, err := bus.PersonalRuntimeName("a", "b", json.RawMessage(`{`)); err == nil {
		t.Fatal("invalid JSON accepted")
	}
	if got := (bus.Names{}).PersonalEvents("a.b*c> d"); got != "mcpbus.events.personal.a_b_c__d" {
		t.Fatalf("event subject %q", got)
	}
}

func TestPersonalServersReplyExtensionsJSON(t *testing.T) {
	t.Parallel()
	r := bus.PersonalServersReply{UserID: "u", Servers: []bus.PersonalServer{{Name: "n", RuntimeName: "p_0123456789ab", Definition: json.RawMessage(`{"command":"npx"}`)}}}
	b, err := r.ExtensionsJSON()
	if err != nil || string(b) != `{"mcpServers":{"p_0123456789ab":{"command":"npx"}}}` {
		t.Fatalf("%s %v", b, err)
	}
}
