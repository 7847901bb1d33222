package main_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/crypto"
)

// TestTokensKeygenPrintsAUsableKey: `mcpbus keygen` prints a fresh key that
// the credentials-key parser accepts.
func TestTokensKeygenPrintsAUsableKey(t *testing.T) {
	t.Parallel()
	var keys []string
	for range 2 {
		out, err := exec.Command(mcpbusBin, "keygen").Output()
		if err != nil {
			t.Fatalf("keygen: %v", err)
		}
		k := strings.TrimSpace(string(out))
		if _, err := crypto.New(k); err != nil {
			t.Fatalf("keygen printed an unusable key: %v", err)
		}
		keys = append(keys, k)
	}
	if keys[0] == keys[1] {
		t.Fatal("keygen printed the same key twice")
	}
	if err := exec.Command(mcpbusBin, "keygen", "extra").Run(); err == nil {
		t.Fatal("keygen accepted an argument")
	}
}
