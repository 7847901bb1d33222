package pinning

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Definition is what a tool's digest covers. Schemas and annotations are
// JSON as the upstream listed them (nil when absent).
type Definition struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// Canonical is d's canonical JSON: object keys sorted, no insignificant
// white space, numbers as written, HTML characters not escaped. A JSON
// field that does not parse is kept as a JSON string of its bytes, so the
// digest still changes with it.
func (d Definition) Canonical() []byte {
	obj := map[string]any{"name": d.Name, "description": d.Description}
	for k, raw := range map[string]json.RawMessage{"input_schema": d.InputSchema, "output_schema": d.OutputSchema, "annotations": d.Annotations} {
		if v, ok := canonicalValue(raw); ok {
			obj[k] = v
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(obj) // maps, strings and json.Number always encode
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// canonicalValue decodes raw keeping numbers as written; absent and null
// are not part of the definition.
func canonicalValue(raw json.RawMessage) (any, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw), true
	}
	return v, v != nil
}

// Digest is the hex SHA-256 of d's canonical JSON.
func (d Definition) Digest() string {
	sum := sha256.Sum256(d.Canonical())
	return hex.EncodeToString(sum[:])
}

// ParseCanonical reads a definition stored as its canonical JSON.
func ParseCanonical(b []byte) (Definition, error) {
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return Definition{}, fmt.Errorf("pinning: stored definition: %w", err)
	}
	return d, nil
}
