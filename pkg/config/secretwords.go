package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/mcpbus/mcpbus/pkg/orderedjson"
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

// ServerEntries decodes an extensions file's bytes in order (orderedjson) and returns its mcpServers object (empty
// when absent). The top level must be an object and mcpServers, when
// present and not null, an object.
func ServerEntries(data []byte) (*orderedjson.Object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return orderedjson.NewObject(), nil
	}
	top, err := DecodeTop(data)
	if err != nil {
		return nil, err
	}
	v, ok := top.Get("mcpServers")
	if !ok || v == nil {
		return orderedjson.NewObject(), nil
	}
	servers, ok := v.(*orderedjson.Object)
	if !ok {
		return nil, fmt.Errorf("extensions config: mcpServers must be a JSON object, got %s", orderedjson.Kind(v))
	}
	return servers, nil
}

// DecodeTop decodes an extensions file's bytes in order; the top level
// must be an object.
func DecodeTop(data []byte) (*orderedjson.Object, error) {
	v, err := orderedjson.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("extensions config is not valid JSON: %w", err)
	}
	top, ok := v.(*orderedjson.Object)
	if !ok {
		return nil, fmt.Errorf("extensions config: the top level must be a JSON object, got %s", orderedjson.Kind(v))
	}
	return top, nil
}

// IsKnownServerKey reports whether k is a typed key of an mcpServers entry
// (any other key is kept verbatim as an extra).
func IsKnownServerKey(k string) bool { return knownServerKeys[k] }
