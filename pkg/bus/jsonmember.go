package bus

import (
	"bytes"
	"encoding/json"
)

// Top-level members of a JSON object found by scanning its bytes, without
// decoding the object: what the read path needs to rewrite one field (a
// contents item's uri) or drop one (a modern result's resultType) while the
// rest (a resource's text or blob) passes through as the upstream's bytes.
// The object must be valid JSON (it came off a decoder that checked it);
// anything unexpected reports no member.

// Member returns the span [start, end) of the value of obj's top-level
// member key, and the span [mstart, mend) of the whole member with the
// comma that separates it from its neighbour (what removing it takes).
func Member(obj []byte, key string) (start, end, mstart, mend int, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, 0, 0, 0, false
	}
	i++
	prevEnd := i // where the previous member's value ended
	for first := true; ; first = false {
		i = skipSpace(obj, i)
		if i < len(obj) && obj[i] == '}' {
			return 0, 0, 0, 0, false
		}
		if !first {
			if i >= len(obj) || obj[i] != ',' {
				return 0, 0, 0, 0, false
			}
			i = skipSpace(obj, i+1)
		}
		kStart := i
		kEnd := skipValue(obj, i)
		if kEnd < 0 || obj[kStart] != '"' {
			return 0, 0, 0, 0, false
		}
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return 0, 0, 0, 0, false
		}
		vStart := skipSpace(obj, i+1)
		vEnd := skipValue(obj, vStart)
		if vEnd < 0 {
			return 0, 0, 0, 0, false
		}
		if keyIs(obj[kStart:kEnd], key) {
			if first {
				// The member and the comma after it, if any.
				next := skipSpace(obj, vEnd)
				if next < len(obj) && obj[next] == ',' {
					return vStart, vEnd, kStart, next + 1, true
				}
				return vStart, vEnd, kStart, vEnd, true
			}
			// The comma before it and the member.
			return vStart, vEnd, prevEnd, vEnd, true
		}
		prevEnd, i = vEnd, vEnd
	}
}

// keyIs reports whether the JSON string k (quotes included) is key.
func keyIs(k []byte, key string) bool {
	if len(k) == len(key)+2 && string(k[1:len(k)-1]) == key {
		return true
	}
	if bytes.IndexByte(k, '\\') < 0 {
		return false
	}
	var s string
	return json.Unmarshal(k, &s) == nil && s == key
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just after the JSON value starting at i,
// -1 when there is none.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := skipValue(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// WithoutMember is obj without its top-level member key (obj itself when
// it has none).
func WithoutMember(obj []byte, key string) []byte {
	_, _, ms, me, ok := Member(obj, key)
	if !ok {
		return obj
	}
	out := make([]byte, 0, len(obj)-(me-ms))
	return append(append(out, obj[:ms]...), obj[me:]...)
}

// WithMember is obj with the value of its top-level member key replaced
// by value (obj itself when it has no such member).
func WithMember(obj []byte, key string, value []byte) []byte {
	s, e, _, _, ok := Member(obj, key)
	if !ok {
		return obj
	}
	out := make([]byte, 0, len(obj)-(e-s)+len(value))
	return append(append(append(out, obj[:s]...), value...), obj[e:]...)
}

// Elements are the values of the JSON array arr, each the upstream's bytes
// (sharing arr's memory); ok is false for anything but an array.
func Elements(arr []byte) (out []json.RawMessage, ok bool) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return []json.RawMessage{}, true
	}
	for {
		e := skipValue(arr, i)
		if e < 0 {
			return nil, false
		}
		out = append(out, json.RawMessage(arr[i:e]))
		i = skipSpace(arr, e)
		if i >= len(arr) {
			return nil, false
		}
		switch arr[i] {
		case ']':
			return out, true
		case ',':
			i = skipSpace(arr, i+1)
		default:
			return nil, false
		}
	}
}
