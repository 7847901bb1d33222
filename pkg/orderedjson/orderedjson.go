// Package orderedjson is the one JSON codec of mcpbus that keeps an
// object's key order: the extensions file is read in file order (servers
// are listed, checked and edited as written) and rewritten the same way by
// the REST config editor.
package orderedjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Object is a decoded JSON object that keeps its key order.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty object.
func NewObject() *Object { return &Object{vals: map[string]any{}} }

// Get returns the value of k.
func (o *Object) Get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// Set replaces the value of k, or appends k.
func (o *Object) Set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// Delete removes k.
func (o *Object) Delete(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, key := range o.keys {
		if key == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

// decodeOrdered decodes one JSON value: objects as *Object (a key written
// twice keeps its first position and its last value), arrays as []any,
// numbers as json.Number.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := NewObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				obj.Set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return obj, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		default:
			return nil, fmt.Errorf("unexpected %q", t)
		}
	default:
		return tok, nil
	}
}

// Clone returns a deep copy of v.
func Clone(v any) any {
	switch x := v.(type) {
	case *Object:
		out := &Object{keys: append([]string(nil), x.keys...), vals: make(map[string]any, len(x.vals))}
		for k, e := range x.vals {
			out.vals[k] = Clone(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Clone(e)
		}
		return out
	default:
		return v
	}
}

// Encode writes v as JSON in key order, without HTML escaping;
// indented by two spaces when pretty.
func Encode(v any, pretty bool) ([]byte, error) {
	var buf bytes.Buffer
	if err := write(&buf, v); err != nil {
		return nil, err
	}
	if !pretty {
		return buf.Bytes(), nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func write(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case *Object:
		buf.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeScalar(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := write(buf, x.vals[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := write(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	default:
		return writeScalar(buf, v)
	}
}

func writeScalar(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // the encoder's newline
	return nil
}

// Keys returns the object's keys in order (not a copy: do not modify).
func (o *Object) Keys() []string { return o.keys }

// Len is the number of keys.
func (o *Object) Len() int { return len(o.keys) }

// Kind names the JSON type of a decoded value for messages: "an object",
// "an array", "a string", "a number", "a boolean" or "null".
func Kind(v any) string {
	switch v.(type) {
	case *Object:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// Members returns the members of the JSON object data in order, each value
// as written, without decoding them.
func Members(data []byte) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("read object: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("not a JSON object")
	}
	var keys []string
	var vals []json.RawMessage
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("read object key: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("object key is not a string")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("read value of %q: %w", key, err)
		}
		keys = append(keys, key)
		vals = append(vals, raw)
	}
	return keys, vals, nil
}

// RepeatedMember returns the first member name of the JSON object data
// that appears more than once, names compared as encoding/json matches
// them to struct fields (case-insensitively, "ſ" and "K" (Kelvin) as "s"
// and "k"); "" when no name repeats or data is not a JSON object (the
// decoder reports that).
func RepeatedMember(data []byte) string {
	if k, decided := repeatedASCII(data); decided {
		return k
	}
	keys, _, err := Members(data)
	if err != nil {
		return ""
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		folded := strings.ToUpper(strings.ToLower(k))
		if seen[folded] {
			return k
		}
		seen[folded] = true
	}
	return ""
}

// Value returns the value of k, nil when absent.
func (o *Object) Value(k string) any { return o.vals[k] }

// maxQuickMembers is how many members repeatedASCII compares pairwise;
// an object with more takes the map in RepeatedMember.
const maxQuickMembers = 16

// repeatedASCII is RepeatedMember without allocating for the common case
// (every request to the MCP endpoint is checked): a well-formed object of
// at most maxQuickMembers members whose names are ASCII without escapes,
// compared case-insensitively as encoding/json matches them. decided is
// false for anything else (non-ASCII or escaped names, which fold by
// Unicode rules; more members; malformed data), which RepeatedMember
// then reads the slow way.
func repeatedASCII(data []byte) (name string, decided bool) {
	var spans [maxQuickMembers][2]int
	n := 0
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return "", skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' || n == maxQuickMembers {
			return "", false
		}
		start := i + 1
		j := start
		for j < len(data) && data[j] != '"' {
			if data[j] == '\\' || data[j] >= 0x80 {
				return "", false
			}
			j++
		}
		if j >= len(data) {
			return "", false
		}
		spans[n] = [2]int{start, j}
		n++
		i = skipSpace(data, j+1)
		if i >= len(data) || data[i] != ':' {
			return "", false
		}
		var ok bool
		if i, ok = skipValue(data, skipSpace(data, i+1)); !ok {
			return "", false
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return "", false
		}
		if data[i] == '}' {
			if skipSpace(data, i+1) != len(data) {
				return "", false
			}
			break
		}
		if data[i] != ',' {
			return "", false
		}
		i = skipSpace(data, i+1)
	}
	for b := 1; b < n; b++ {
		kb := data[spans[b][0]:spans[b][1]]
		for a := range b {
			if asciiEqualFold(data[spans[a][0]:spans[a][1]], kb) {
				return string(kb), true
			}
		}
	}
	return "", true
}

// skipSpace returns the index of the first non-whitespace byte of data
// at or after i.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just after the JSON value starting at
// data[i] (strings, objects and arrays matched up, scalars to the next
// delimiter), and false when data ends first.
func skipValue(data []byte, i int) (int, bool) {
	depth := 0
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			i++
			for i < len(data) && data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(data) {
				return i, false
			}
			i++
		case '{', '[':
			depth++
			i++
		case '}', ']':
			if depth == 0 {
				return i, true
			}
			depth--
			i++
		case ',':
			if depth == 0 {
				return i, true
			}
			i++
		default:
			if depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
				return i, true
			}
			i++
		}
		if depth == 0 && i > 0 && (data[i-1] == '"' || data[i-1] == '}' || data[i-1] == ']') {
			return i, true
		}
	}
	return i, depth == 0
}

// asciiEqualFold reports a and b equal ignoring ASCII case.
func asciiEqualFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
