package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// MaskedValue is the placeholder a masked secret is shown as, and the value
// an edit sends to keep a stored secret.
const MaskedValue = "***"

// sensitiveKey matches a normalised key name that holds a secret
// (reference §1.5).
var sensitiveKey = regexp.MustCompile(`(^|_)(api_key|apikey|access_key|private_key|client_secret|secret|token|password|passwd|credential|credentials|authorization|bearer)(_|$)`)

// NormalizeKey splits camelCase into snake_case, lowercases, and replaces
// every non-alphanumeric rune with "_": "refreshToken" → "refresh_token",
// "X-Api-Key" → "x_api_key".
func NormalizeKey(name string) string {
	var b strings.Builder
	runes := []rune(name)
	for i, r := range runes {
		if unicode.IsUpper(r) && i > 0 {
			prev := runes[i-1]
			nextLower := i+1 < len(runes) && unicode.IsLower(runes[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// IsSensitiveKey reports whether an extra (untyped) key holds a secret, by
// its normalised name: api_key, token, secret, password, credential,
// authorization, bearer and their relatives.
func IsSensitiveKey(name string) bool { return sensitiveKey.MatchString(NormalizeKey(name)) }

// MaskServerEntry returns a server entry (as written in the file or stored
// for a personal connection) with its secrets masked: every env and headers
// value becomes "***"; oauth.client_secret and oauth.refresh_token become
// null; every oauth.extra_token_params and user_auth.users value becomes
// "***"; any other untyped key whose normalised name is a secret word
// becomes "***" at any depth, inside objects and lists. url and
// oauth.token_url lose their userinfo, query string and fragment (MaskURL);
// tokens in args are masked (MaskArgs). headers_from_context (header and
// secret names only) is returned as it is. Key order is kept.
func MaskServerEntry(entry json.RawMessage) (json.RawMessage, error) {
	v, err := decodeOrdered(entry)
	if err != nil {
		return nil, fmt.Errorf("mask server entry: %w", err)
	}
	return encodeOrdered(maskServer(v), false)
}

// MaskedServers returns the mcpServers object of an extensions file's bytes
// with every entry masked (MaskServerEntry), in file order; "{}" when data is
// empty or has no mcpServers. A name written twice keeps its first position
// and its last definition, as the parser does.
func MaskedServers(data []byte) (json.RawMessage, error) {
	servers, err := serversOf(data)
	if err != nil {
		return nil, err
	}
	out := newObject()
	for _, name := range servers.keys {
		out.set(name, maskServer(servers.vals[name]))
	}
	return encodeOrdered(out, false)
}

// maskServer masks a decoded server entry (a copy; v is not changed).
func maskServer(v any) any {
	srv, ok := v.(*object)
	if !ok {
		return v
	}
	out := newObject()
	for _, k := range srv.keys {
		val := srv.vals[k]
		switch {
		case k == "env" || k == "headers":
			out.set(k, maskAllValues(val))
		case k == "url":
			out.set(k, maskURLValue(val))
		case k == "args":
			out.set(k, maskArgsValue(val))
		case k == "oauth":
			out.set(k, maskOAuth(val))
		case k == "user_auth":
			out.set(k, maskNested(val, "users"))
		case k == "headers_from_context" || knownServerKeys[k]:
			out.set(k, cloneOrdered(val))
		case IsSensitiveKey(k):
			out.set(k, MaskedValue)
		default:
			out.set(k, maskSensitive(val))
		}
	}
	return out
}

// maskURLValue masks a decoded URL value (MaskURL); non-strings are
// returned as they are.
func maskURLValue(v any) any {
	if u, ok := v.(string); ok {
		return MaskURL(u)
	}
	return cloneOrdered(v)
}

// maskAllValues turns every value of an object into "***"; anything but an
// object or null is masked whole.
func maskAllValues(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case *object:
		out := newObject()
		for _, k := range x.keys {
			out.set(k, MaskedValue)
		}
		return out
	default:
		return MaskedValue
	}
}

// maskNested masks every value of v[field] (an object of secrets).
func maskNested(v any, field string) any {
	obj, ok := v.(*object)
	if !ok {
		return cloneOrdered(v)
	}
	out := cloneOrdered(obj).(*object)
	if inner, ok := out.get(field); ok {
		out.set(field, maskAllValues(inner))
	}
	return out
}

// oauthSecretKeys are shown as null and restored from null on edit.
var oauthSecretKeys = []string{"client_secret", "refresh_token"}

// oauthTypedKeys are the oauth fields that are not secrets by themselves
// (token_url and token_field are names, not tokens).
var oauthTypedKeys = map[string]bool{
	"enabled": true, "token_url": true, "grant_type": true, "client_id": true,
	"scope": true, "audience": true, "token_field": true, "token_type_field": true,
	"expires_in_field": true, "default_token_type": true, "refresh_skew_seconds": true,
}

func maskOAuth(v any) any {
	obj, ok := v.(*object)
	if !ok {
		return cloneOrdered(v)
	}
	out := newObject()
	for _, k := range obj.keys {
		val := obj.vals[k]
		switch {
		case k == "client_secret" || k == "refresh_token":
			out.set(k, nil)
		case k == "extra_token_params":
			out.set(k, maskAllValues(val))
		case k == "token_url":
			out.set(k, maskURLValue(val))
		case oauthTypedKeys[k]:
			out.set(k, cloneOrdered(val))
		case IsSensitiveKey(k):
			out.set(k, MaskedValue)
		default:
			out.set(k, maskSensitive(val))
		}
	}
	return out
}

// maskSensitive masks, at any depth, the values of keys whose normalised
// name is a secret word.
func maskSensitive(v any) any {
	switch x := v.(type) {
	case *object:
		out := newObject()
		for _, k := range x.keys {
			if IsSensitiveKey(k) {
				out.set(k, MaskedValue)
			} else {
				out.set(k, maskSensitive(x.vals[k]))
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskSensitive(e)
		}
		return out
	default:
		return v
	}
}

// serversOf decodes a file's bytes and returns its mcpServers object (empty
// when absent). The top level must be an object and mcpServers, when
// present and not null, an object.
func serversOf(data []byte) (*object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return newObject(), nil
	}
	top, err := decodeTop(data)
	if err != nil {
		return nil, err
	}
	v, ok := top.get("mcpServers")
	if !ok || v == nil {
		return newObject(), nil
	}
	servers, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("extensions config: mcpServers must be a JSON object, got %s", kindOf(v))
	}
	return servers, nil
}

func decodeTop(data []byte) (*object, error) {
	v, err := decodeOrdered(data)
	if err != nil {
		return nil, fmt.Errorf("extensions config is not valid JSON: %w", err)
	}
	top, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("extensions config: the top level must be a JSON object, got %s", kindOf(v))
	}
	return top, nil
}

// object is a decoded JSON object that keeps its key order.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// set replaces the value of k, or appends k.
func (o *object) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *object) del(k string) {
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

// decodeOrdered decodes one JSON value: objects as *object (a key written
// twice keeps its first position and its last value), arrays as []any,
// numbers as json.Number.
func decodeOrdered(data []byte) (any, error) {
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
			obj := newObject()
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
				obj.set(k, v)
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

func cloneOrdered(v any) any {
	switch x := v.(type) {
	case *object:
		out := &object{keys: append([]string(nil), x.keys...), vals: make(map[string]any, len(x.vals))}
		for k, e := range x.vals {
			out.vals[k] = cloneOrdered(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneOrdered(e)
		}
		return out
	default:
		return v
	}
}

// encodeOrdered writes v as JSON in key order, without HTML escaping;
// indented by two spaces when pretty.
func encodeOrdered(v any, pretty bool) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeOrdered(&buf, v); err != nil {
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

func writeOrdered(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case *object:
		buf.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeScalar(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeOrdered(buf, x.vals[k]); err != nil {
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
			if err := writeOrdered(buf, e); err != nil {
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

// kindOf names the JSON type of an ordered value for messages.
func kindOf(v any) string {
	if _, ok := v.(*object); ok {
		return "an object"
	}
	return jsonKind(v)
}
