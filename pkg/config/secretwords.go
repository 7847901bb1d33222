package config

import (
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
