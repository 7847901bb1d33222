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
