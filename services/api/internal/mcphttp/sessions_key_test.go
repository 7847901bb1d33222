package mcphttp

import (
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A session's key is Digest(user) "." Digest(id), as stored in the
// sessions bucket by every replica, built in one allocation.
func TestSessionKey(t *testing.T) {
	for _, c := range [][2]string{{"alice", "sess-1"}, {"", ""}, {strings.Repeat("u", 300), strings.Repeat("i", 300)}} {
		if got, want := sessionKey(c[0], c[1]), bus.Digest(c[0])+"."+bus.Digest(c[1]); got != want {
			t.Fatalf("sessionKey(%d, %d bytes) = %s, want %s", len(c[0]), len(c[1]), got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = sessionKey("alice", "0123456789abcdef0123456789abcdef") }); n > 1 {
		t.Fatalf("sessionKey allocates %v times, want 1", n)
	}
}
