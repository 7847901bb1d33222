package redact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// MinResultLen is the shortest secret [ForResults] redacts from tool
// results: a result is data the user asked for, so short values ("admin",
// a port, "true") that happen to equal a configured value must not be
// masked in it.
const MinResultLen = 8

// ForResults returns a Redactor of the values at least MinResultLen bytes
// long, for [Redactor.JSON] on tool results; nil when there is none (and
// then JSON costs nothing).
func ForResults(values ...string) *Redactor {
	long := make([]string, 0, len(values))
	for _, v := range values {
		if len(v) >= MinResultLen {
			long = append(long, v)
		}
	}
	if len(long) == 0 {
		return nil
	}
	return New(long...)
}

// JSON returns raw with every known value replaced by Mask inside its JSON
// strings (object keys included); everything else (structure, order,
// numbers, strings without a secret) is left byte for byte. raw itself is
// returned when no value occurs in it in any spelling r knows (the cheap
// path: one bytes.Contains per spelling) or when it is not valid JSON.
// URLs are not cleaned: a tool result's URLs are data.
//
// What it cannot catch: a secret the upstream transformed (base64 or
// another encoding, hashed, reversed, split across strings or blocks,
// spelled with \u escapes of ordinary characters), or one shorter than
// MinResultLen when r comes from ForResults.
func (r *Redactor) JSON(raw []byte) []byte {
	if r == nil || !r.occursIn(raw) || !json.Valid(raw) {
		return raw
	}
	var out bytes.Buffer
	out.Grow(len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '"' {
			out.WriteByte(raw[i])
			i++
			continue
		}
		end := stringEnd(raw, i)
		lit := raw[i:end]
		var s string
		if err := json.Unmarshal(lit, &s); err == nil {
			if red := r.replaceValues(s); red != s {
				lit = quote(red)
			}
		}
		out.Write(lit)
		i = end
	}
	return out.Bytes()
}

// occursIn reports whether any spelling of r's values is in b.
func (r *Redactor) occursIn(b []byte) bool {
	for _, v := range r.values {
		if bytes.Contains(b, []byte(v)) {
			return true
		}
	}
	return false
}

// replaceValues replaces r's values in s by Mask (String without the URL
// rule).
func (r *Redactor) replaceValues(s string) string {
	for _, v := range r.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Mask)
		}
	}
	return s
}

// stringEnd returns the index after the closing quote of the JSON string
// starting at raw[start] (valid JSON: the quote is there).
func stringEnd(raw []byte, start int) int {
	for i := start + 1; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(raw)
}

// quote is s as a JSON string, without HTML escaping.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
