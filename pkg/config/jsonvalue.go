package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// expandString applies whole-string $VAR expansion: a string starting with
// "$" is replaced by the environment variable named by the rest of it ("" if
// unset). Anything else is returned unchanged, so "Bearer $X" stays literal
// and "${X}" looks up a variable literally named "{X}".
func expandString(s string) string {
	if strings.HasPrefix(s, "$") {
		return lookupVar(s[1:])
	}
	return s
}

// expandEnv returns a copy of v with expandString applied to every string
// value at any depth. Object keys are never expanded.
func expandEnv(v any) any { return expandWith(v, expandString) }

// expandWith returns a copy of v with expand applied to every string value
// at any depth. Object keys are never expanded.
func expandWith(v any, expand func(string) string) any {
	switch x := v.(type) {
	case string:
		return expand(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = expandWith(e, expand)
		}
		return out
	case map[any]any: // yaml.v3 with non-string keys
		out := make(map[any]any, len(x))
		for k, e := range x {
			out[k] = expandWith(e, expand)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = expandWith(e, expand)
		}
		return out
	default:
		return v
	}
}

// decodeJSON decodes one JSON value keeping numbers as json.Number.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// jsonKind names the JSON type of a decoded value, for messages that must
// not repeat the value itself.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// canonicalJSON encodes v with sorted object keys and no HTML escaping, so
// equal values always give equal bytes.
func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// sha256Hex is the lowercase hex SHA-256 of b.
func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fingerprintOf is the hex SHA-256 of canonicalJSON(v).
func fingerprintOf(v any) string {
	b, err := canonicalJSON(v)
	if err != nil {
		// Decoded JSON values always encode; keep a stable fallback anyway.
		b = []byte(fmt.Sprintf("%#v", v))
	}
	return sha256Hex(b)
}

// position converts the byte offset reported by encoding/json ("the error
// occurred after reading Offset bytes") into a 1-based line and column
// (columns count runes) of the offending byte.
func position(data []byte, offset int64) (line, col int) {
	pos := int(offset) - 1
	if pos < 0 {
		pos = 0
	}
	if pos > len(data) {
		pos = len(data)
	}
	before := data[:pos]
	line = 1 + bytes.Count(before, []byte{'\n'})
	start := bytes.LastIndexByte(before, '\n') + 1
	col = utf8.RuneCount(before[start:]) + 1
	return line, col
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
