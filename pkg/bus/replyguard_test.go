package bus_test

import (
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A request is answered only on an inbox its caller may receive on: on a
// per-user subject the user's own inbox prefix, elsewhere a NATS inbox.
// Subjects of users, KV keys, events and anything with a wildcard are
// never reply subjects.
func TestReplyAllowed(t *testing.T) {
	t.Parallel()
	n, _ := bus.NewNames("stg")
	alice, plain := n.User("alice", bus.VerbToolsCall), n.ToolsCall()
	cases := []struct {
		subject, reply string
		ok             bool
	}{
		{alice, "", true},
		{alice, "_INBOX_alice.abc", true},
		{alice, "_INBOX_alice.Nuid123.42", true},
		{alice, "_INBOX.abc", false},
		{alice, "_INBOX_bob.abc", false},
		{alice, "_INBOX_alice.", false},
		{alice, "_INBOX_alice.a.>", false},
		{alice, "_INBOX_alice.a..b", false},
		{alice, n.User("bob", bus.VerbToolsCall), false},
		{alice, "$KV.stg_MCPBUS.generation", false},
		{alice, n.EventsCatalog(), false},
		{alice, "_INBOX_alice." + strings.Repeat("a", 300), false},
		{n.User("alice@example.com", bus.VerbToolsList), "_INBOX_~YWxpY2VAZXhhbXBsZS5jb20.x", true},
		{n.User("alice@example.com", bus.VerbToolsList), "_INBOX_alice.x", false},
		{"stg.mcpbus.u.~!!.tools.call", "_INBOX.abc", false},
		{plain, "_INBOX.abc.def", true},
		{plain, "_INBOX_agent-trusted.abc.def", true},
		{plain, "_INBOX_.abc", false},
		{plain, "_INBOX_agent-trusted", false},
		{plain, "_INBOX.*", false},
		{plain, "$KV.stg_MCPBUS.config", false},
		{plain, n.EventsCatalog(), false},
		{plain, n.User("bob", bus.VerbToolsCall), false},
		{n.InternalCatalog(), n.ProgressInboxPrefix() + "abc", false},
	}
	for _, c := range cases {
		if got := n.ReplyAllowed(c.subject, c.reply); got != c.ok {
			t.Errorf("ReplyAllowed(%q, %q) = %v, want %v", c.subject, c.reply, got, c.ok)
		}
	}
}
