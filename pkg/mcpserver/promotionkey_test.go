package mcpserver

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// promotionKey is the hex SHA-256 of "user\x00thread", as stored in the
// promotion bucket by every replica (short and long inputs).
func TestPromotionKey(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{{"alice", "default"}, {"", ""}, {strings.Repeat("u", 150), strings.Repeat("t", 150)}} {
		sum := sha256.Sum256([]byte(c[0] + "\x00" + c[1]))
		if got, want := promotionKey(c[0], c[1]), hex.EncodeToString(sum[:]); got != want {
			t.Fatalf("promotionKey(%q, %q) = %s, want %s", c[0], c[1], got, want)
		}
	}
}
