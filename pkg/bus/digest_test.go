package bus_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Digest is the hex SHA-256 of its input, for inputs shorter and longer
// than its stack buffer, in one allocation (stored keys depend on it).
func TestDigest(t *testing.T) {
	for _, s := range []string{"", "sess-1", strings.Repeat("x", 127), strings.Repeat("y", 129), strings.Repeat("z", 4096)} {
		sum := sha256.Sum256([]byte(s))
		if got, want := bus.Digest(s), hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("Digest(%d bytes) = %s, want %s", len(s), got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = bus.Digest("a-session-id-of-usual-length-0123456789") }); n > 1 {
		t.Fatalf("Digest allocates %v times, want 1", n)
	}
}

// AppendDigest appends Digest's text.
func TestAppendDigest(t *testing.T) {
	t.Parallel()
	if got, want := string(bus.AppendDigest([]byte("k."), "sess-1")), "k."+bus.Digest("sess-1"); got != want {
		t.Fatalf("AppendDigest = %s, want %s", got, want)
	}
}
