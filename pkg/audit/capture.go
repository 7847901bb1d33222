package audit

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/redact"
)

// Capture returns a call's arguments as an audit record keeps them with
// audit.capture_arguments on: the value of every key whose name is a secret
// word (config.IsSensitiveKey: token, password, api_key, …) becomes "***"
// at any depth, every known secret value (the call's context secrets and
// header values, given as secrets) is replaced by redact.Mask wherever it
// appears, and the result is cut to maxBytes, in which case it is returned
// as a JSON string of its first bytes and truncated is true. Empty or
// invalid arguments give nil.
func Capture(args json.RawMessage, maxBytes int, secrets ...string) (out json.RawMessage, truncated bool) {
	if len(args) == 0 {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return nil, false
	}
	b, err := json.Marshal(maskKeys(v))
	if err != nil {
		return nil, false
	}
	s := redact.New(secrets...).String(string(b))
	if len(s) <= maxBytes {
		return json.RawMessage(s), false
	}
	cut := s[:maxBytes]
	for !utf8.ValidString(cut) && len(cut) > 0 {
		cut = cut[:len(cut)-1]
	}
	q, _ := json.Marshal(cut)
	return q, true
}

// maskKeys masks the values of secret-named keys in a decoded JSON value.
func maskKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if config.IsSensitiveKey(k) {
				t[k] = redact.Mask
				continue
			}
			t[k] = maskKeys(val)
		}
	case []any:
		for i := range t {
			t[i] = maskKeys(t[i])
		}
	}
	return v
}
