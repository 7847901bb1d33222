package bus

import (
	"encoding/json"
	"testing"
)

// normalizeID's fast path (canonicalID) returns exactly what decoding and
// encoding the id returns, and takes the ids clients send.
func TestNormalizeIDFastPathIsExact(t *testing.T) {
	roundTrip := func(id json.RawMessage) string {
		var v any
		if json.Unmarshal(id, &v) != nil {
			return string(id)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, id := range []string{`0`, `1`, `42`, `-7`, `123456789012345`, `1234567890123456`, `-0`, `01`, `1.0`, `1e3`,
		`"a"`, `""`, `"mcpbus-12"`, `"a b"`, `"<x>"`, `"a&b"`, `"\u0041"`, `"\"q\""`, "\"\x7f\"", `"é"`, `null`, `true`, `{}`, `x`} {
		if got, want := string(normalizeID(json.RawMessage(id))), roundTrip(json.RawMessage(id)); got != want {
			t.Errorf("normalizeID(%s) = %s, want %s", id, got, want)
		}
	}
	for _, id := range []string{`1`, `-7`, `123456789012345`, `"mcpbus-12"`, `"0f9a-b"`, `""`} {
		if !canonicalID(json.RawMessage(id)) {
			t.Errorf("canonicalID(%s) = false: the common id takes the slow path", id)
		}
	}
	for _, id := range []string{`1.0`, `1e3`, `"<x>"`, `"\u0041"`} {
		if canonicalID(json.RawMessage(id)) {
			t.Errorf("canonicalID(%s) = true, but encoding/json writes it differently", id)
		}
	}
}
