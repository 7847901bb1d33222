// Package headers holds the rules every HTTP header value that mcpbus sends
// upstream obeys, whatever its source (static config, OAuth, user_auth,
// headers_from_context, interceptors): one field per name compared
// case-insensitively, values that can be sent as they are, and a
// fingerprint of an effective header set that never reveals a value.
//
// Error texts built from this package name the header or key and the
// reason, never the value.
package headers

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
)

// Reasons a value cannot be sent as an HTTP header value.
const (
	ReasonNonASCII   = "contains characters outside ASCII"
	ReasonControl    = "contains a line break or another forbidden control character"
	ReasonWhitespace = "has leading or trailing whitespace"
)

// Check returns why value cannot be sent as an HTTP header value, or "" when
// it can. Interior tabs are allowed; any other control character (NUL, CR,
// LF, VT, FF, DEL, …), any byte outside ASCII and a leading or trailing
// space or tab are not.
func Check(value string) string {
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c >= 0x80 {
			return ReasonNonASCII
		}
	}
	for i := 0; i < len(value); i++ {
		c := value[i]
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return ReasonControl
		}
	}
	if value != "" {
		first, last := value[0], value[len(value)-1]
		if first == ' ' || first == '\t' || last == ' ' || last == '\t' {
			return ReasonWhitespace
		}
	}
	return ""
}

// ValidName reports whether name is an HTTP token (RFC 9110 field name).
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Set sets name to value in h, replacing every spelling of name (compared
// case-insensitively) and keeping the spelling h already uses, so the field
// is sent once. With several existing spellings the smallest one is kept.
func Set(h map[string]string, name, value string) {
	spelling := ""
	for k := range h {
		if strings.EqualFold(k, name) {
			if spelling == "" || k < spelling {
				spelling = k
			}
			delete(h, k)
		}
	}
	if spelling == "" {
		spelling = name
	}
	h[spelling] = value
}

// Get returns the value of name in h, compared case-insensitively.
func Get(h map[string]string, name string) (string, bool) {
	if v, ok := h[name]; ok {
		return v, true
	}
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// Clone returns a copy of h (never nil).
func Clone(h map[string]string) map[string]string {
	out := make(map[string]string, len(h)+2)
	for k, v := range h {
		out[k] = v
	}
	return out
}

// Names returns the names in h, sorted; safe to log.
func Names(h map[string]string) []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// emptyFingerprint is Fingerprint of no headers: the SHA-256 of nothing.
const emptyFingerprint = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Fingerprint is the hex SHA-256 of the header set (names lower-cased,
// sorted, with their values). Equal fingerprints mean the same effective
// headers; the fingerprint reveals nothing usable about the values.
func Fingerprint(h map[string]string) string {
	if len(h) == 0 {
		return emptyFingerprint
	}
	keys := make([]string, 0, len(h))
	lower := make(map[string]string, len(h))
	for k, v := range h {
		lk := strings.ToLower(k)
		keys = append(keys, lk)
		lower[lk] = v
	}
	sort.Strings(keys)
	sum := sha256.New()
	for _, k := range keys {
		sum.Write([]byte(k))
		sum.Write([]byte{0})
		sum.Write([]byte(lower[k]))
		sum.Write([]byte{0})
	}
	return hex.EncodeToString(sum.Sum(nil))
}
