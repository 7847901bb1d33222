package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Secrets inside strings: a URL's userinfo, query string and fragment, and
// tokens passed on a stdio command line. They are masked, restored and
// refused as placeholders by the same rules as env and headers values.

// MaskURL returns s with its userinfo, query string and fragment each
// replaced by "***" ("https://***@host/path?***#***"); s itself when it
// has none of them or is a "$VAR" placeholder, and "***" when it does not
// parse as a URL (or is opaque) and so cannot be shown in part.
func MaskURL(s string) string {
	if s == "" || placeholder(s) {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return MaskedValue
	}
	if u.User == nil && u.RawQuery == "" && u.Fragment == "" {
		return s
	}
	if u.Opaque != "" {
		return MaskedValue
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme + ":")
	}
	if u.Host != "" || u.User != nil {
		b.WriteString("//")
	}
	if u.User != nil {
		b.WriteString(MaskedValue + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" {
		b.WriteString("?" + MaskedValue)
	}
	if u.Fragment != "" {
		b.WriteString("#" + MaskedValue)
	}
	return b.String()
}

// urlPlaceholder reports whether s holds "***" where MaskURL puts one: as
// the whole value, the userinfo, the query string or the fragment.
func urlPlaceholder(s string) bool {
	if s == MaskedValue {
		return true
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	return maskedUser(u) || u.RawQuery == MaskedValue || u.Fragment == MaskedValue
}

// maskedUser reports whether u's userinfo is the "***" placeholder.
func maskedUser(u *url.URL) bool {
	if u.User == nil {
		return false
	}
	_, hasPassword := u.User.Password()
	return u.User.Username() == MaskedValue && !hasPassword
}

// restoreURL merges an edited URL with the stored one: a body equal to
// the stored URL's masked form is the stored URL; otherwise each "***"
// part (userinfo, query, fragment) takes the stored part, but only while
// the scheme and host stay the same, so a masked credential never follows
// the URL to another host. A "***" with nothing stored to restore is
// refused.
func restoreURL(name, field string, stored any, body string) (string, error) {
	if !urlPlaceholder(body) {
		return body, nil
	}
	refuse := func(why string) (string, error) {
		return "", editErrorf(EditInvalid, name, field,
			"Cannot persist masked secret placeholder for MCP server '%s' field '%s' %s; provide the full URL.", name, field, why)
	}
	prev, ok := stored.(string)
	if !ok || prev == "" {
		return refuse("(nothing is stored to keep)")
	}
	if body == MaskURL(prev) {
		return prev, nil
	}
	bu, err1 := url.Parse(body)
	su, err2 := url.Parse(prev)
	if err1 != nil || err2 != nil || body == MaskedValue {
		return refuse("(the stored URL cannot be kept in part)")
	}
	if !strings.EqualFold(bu.Scheme, su.Scheme) || !strings.EqualFold(bu.Host, su.Host) {
		return refuse("(the masked parts are kept only while the scheme and host stay the same)")
	}
	if maskedUser(bu) {
		if su.User == nil {
			return refuse("(no userinfo is stored)")
		}
		bu.User = su.User
	}
	if bu.RawQuery == MaskedValue {
		if su.RawQuery == "" {
			return refuse("(no query string is stored)")
		}
		bu.RawQuery = su.RawQuery
	}
	if bu.Fragment == MaskedValue {
		if su.Fragment == "" {
			return refuse("(no fragment is stored)")
		}
		bu.Fragment, bu.RawFragment = su.Fragment, su.RawFragment
	}
	return bu.String(), nil
}

// MaskArgs returns a stdio command line with its tokens masked, and for
// each argument whether it carries a secret. An argument carries one when
//
//   - it contains "://" and has userinfo, a query string or a fragment
//     (masked by MaskURL: "https://***@host/sse?***");
//   - it is NAME=VALUE or NAME:VALUE, with any leading dashes, and NAME is
//     a secret word by IsSensitiveKey ("--api-key=…", "--token=…",
//     "GITHUB_TOKEN=…", "Authorization: Bearer …"): VALUE becomes "***";
//   - it follows a flag "--NAME" or "-NAME" without a value whose NAME is
//     a secret word ("--token", "…" or "--api-key", "…") and does not
//     itself start with "-": the whole argument becomes "***".
//
// A whole-string "$VAR" argument names a variable and is shown as it is. A
// bare token with no such flag in front of it cannot be told from any
// other argument and is not masked; pass secrets in env instead.
func MaskArgs(args []string) (masked []string, secret []bool) {
	masked = make([]string, len(args))
	secret = make([]bool, len(args))
	for i, a := range args {
		masked[i] = a
		if placeholder(a) {
			continue // "$VAR" names a variable of the service's environment
		}
		if i > 0 && !strings.HasPrefix(a, "-") && secretFlag(args[i-1]) {
			masked[i], secret[i] = MaskedValue, true
			continue
		}
		if strings.Contains(a, "://") {
			masked[i] = MaskURL(a)
			secret[i] = masked[i] != a || urlPlaceholder(a)
			continue
		}
		if j := strings.IndexAny(a, "=:"); j > 0 && IsSensitiveKey(strings.TrimLeft(a[:j], "-")) {
			prefix := a[:j+1]
			if rest := a[j+1:]; strings.HasPrefix(rest, " ") {
				prefix += " "
			}
			masked[i], secret[i] = prefix+MaskedValue, true
		}
	}
	return masked, secret
}

// secretFlag reports whether a is a flag without an attached value that
// names a secret ("--token", "-api-key").
func secretFlag(a string) bool {
	if !strings.HasPrefix(a, "-") || strings.ContainsAny(a, "=:") {
		return false
	}
	return IsSensitiveKey(strings.TrimLeft(a, "-"))
}

// argStrings returns the string elements of a decoded args list and
// whether every element is a string.
func argStrings(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// maskArgsValue masks a decoded args list (lists with non-strings are
// returned as they are; the schema check refuses them).
func maskArgsValue(v any) any {
	args, ok := argStrings(v)
	if !ok {
		return cloneOrdered(v)
	}
	masked, _ := MaskArgs(args)
	out := make([]any, len(masked))
	for i, m := range masked {
		out[i] = m
	}
	return out
}

// argPlaceholder returns the index of the first argument whose secret part
// is the "***" placeholder, or -1.
func argPlaceholder(args []string) int {
	masked, secret := MaskArgs(args)
	for i := range args {
		if secret[i] && masked[i] == args[i] {
			return i
		}
	}
	return -1
}

// restoreArgs merges an edited args list with the stored one, position by
// position: an argument equal to the masked form of the stored argument at
// the same index is the stored argument; any other placeholder is refused.
func restoreArgs(name string, stored, body any) (any, error) {
	bargs, ok := argStrings(body)
	if !ok {
		return body, nil
	}
	sargs, _ := argStrings(stored)
	smasked, _ := MaskArgs(sargs)
	out := make([]any, len(bargs))
	for i, a := range bargs {
		out[i] = a
		if i < len(sargs) && a == smasked[i] && a != sargs[i] {
			out[i] = sargs[i]
		}
	}
	restored, _ := argStrings(out)
	if i := argPlaceholder(restored); i >= 0 {
		field := fmt.Sprintf("args[%d]", i)
		return nil, editErrorf(EditInvalid, name, field,
			"Cannot persist masked secret placeholder for MCP server '%s' field '%s'; provide a real value (a masked argument is kept only at its stored position).", name, field)
	}
	return out, nil
}
