package pinning_test

import (
	"encoding/json"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/pinning"
)

// BenchmarkDigest is the digest of one typical tool (discovery computes one
// per tool per catalog build).
func BenchmarkDigest(b *testing.B) {
	d := pinning.Definition{Name: "search_issues", Description: "Searches the issues of a repository by text, label and state; returns at most 50.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"the text"},"labels":{"type":"array","items":{"type":"string"}},"state":{"type":"string","enum":["open","closed","all"]},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["q"]}`),
		Annotations: json.RawMessage(`{"readOnlyHint":true,"openWorldHint":true}`)}
	for b.Loop() {
		_ = d.Digest()
	}
}
