package config

import (
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

// HasURLPlaceholder reports whether s holds "***" where MaskURL puts one: as
// the whole value, the userinfo, the query string or the fragment.
func HasURLPlaceholder(s string) bool {
	if s == MaskedValue {
		return true
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	return MaskedUser(u) || u.RawQuery == MaskedValue || u.Fragment == MaskedValue
}

// MaskedUser reports whether u's userinfo is the "***" placeholder.
func MaskedUser(u *url.URL) bool {
	if u.User == nil {
		return false
	}
	_, hasPassword := u.User.Password()
	return u.User.Username() == MaskedValue && !hasPassword
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
			secret[i] = masked[i] != a || HasURLPlaceholder(a)
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
