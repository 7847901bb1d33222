// Package redact keeps secrets out of text that people read: error
// messages, log lines and the stderr of upstream MCP servers.
//
// Two rules, applied together by [Redactor.String]:
//
//   - URLs lose their userinfo, query string and fragment
//     ("https://u:p@host/mcp?api_key=k" becomes "https://host/mcp"), wherever
//     they appear in the text ([URLs]). Credentials in URLs are common
//     (?api_key=, ?token=, user:password@), so every URL is treated so,
//     whether or not it is known to carry one.
//   - Known secret values (a server's env and header values, OAuth client
//     secrets, the userinfo and query values of its URL) are replaced by
//     [Mask] wherever they appear, also in their URL-escaped and
//     JSON-escaped spellings. Values shorter than [MinLen] bytes are left
//     alone: replacing "1" or "on" everywhere would mangle every message
//     while protecting nothing worth a secret's name.
//
// A nil *Redactor applies the URL rule only. Redactors are immutable and
// safe for concurrent use.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Mask replaces a redacted value.
const Mask = "***"

// MinLen is the shortest value a Redactor replaces.
const MinLen = 4

// urlPattern finds URLs with a scheme in free text. It stops at white space,
// quotes and angle brackets, which is how URLs are delimited in Go's error
// messages (Post "https://…": …), JSON and logs.
var urlPattern = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'<>`]+")

// URL returns u without userinfo, query string and fragment. It works on the
// text, so it also cleans URLs that do not parse (and never returns one
// that still carries the parts it removes).
func URL(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	scheme, rest := u[:i+3], u[i+3:]
	// The authority ends at the first "/", "?" or "#"; userinfo ends at its
	// last "@".
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		rest = rest[at+1:]
	}
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		rest = rest[:q]
	}
	return scheme + rest
}

// URLs rewrites every URL in text with [URL].
func URLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	return urlPattern.ReplaceAllStringFunc(text, URL)
}

// URLSecrets returns the secret parts of u: the user name and password of
// its userinfo, the Basic credentials net/http sends for them (base64 of
// "user:password", as an upstream echoing its request headers would show
// them), and every query value (decoded and as written). nil when u has
// none or does not parse.
func URLSecrets(u string) []string {
	p, err := url.Parse(u)
	if err != nil {
		return nil
	}
	var out []string
	if p.User != nil {
		out = append(out, p.User.Username())
		pw, _ := p.User.Password()
		out = append(out, pw, base64.StdEncoding.EncodeToString([]byte(p.User.Username()+":"+pw)))
	}
	for _, vs := range p.Query() {
		out = append(out, vs...)
	}
	for _, kv := range strings.Split(p.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok {
			out = append(out, v)
		}
	}
	return out
}

// Redactor replaces known secret values (and cleans URLs) in text.
type Redactor struct {
	// values to replace, longest first, so a value containing another is
	// replaced whole.
	values []string
}

// New returns a Redactor for values. Values shorter than MinLen and
// duplicates are dropped; the URL-escaped and JSON-escaped spellings of
// each value are added.
func New(values ...string) *Redactor {
	return (*Redactor)(nil).With(values...)
}

// With returns a Redactor for r's values plus values (r itself is not
// changed). r may be nil.
func (r *Redactor) With(values ...string) *Redactor {
	var out []string
	if r != nil {
		out = slices.Clone(r.values)
	}
	for _, v := range values {
		if len(v) < MinLen {
			continue
		}
		out = append(out, v, url.QueryEscape(v), url.PathEscape(v), jsonEscape(v))
	}
	slices.SortFunc(out, func(a, b string) int {
		if d := len(b) - len(a); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	out = slices.Compact(out)
	if len(out) == 0 && r == nil {
		return nil
	}
	return &Redactor{values: out}
}

func jsonEscape(v string) string {
	b, _ := json.Marshal(v)
	return string(b[1 : len(b)-1])
}

// String returns s with every known value replaced by Mask and every URL
// cleaned.
func (r *Redactor) String(s string) string {
	if r != nil {
		s = r.replaceValues(s)
	}
	return URLs(s)
}

// Error returns err unchanged when String leaves its message as it is;
// otherwise an error whose message is redacted and that still unwraps to
// err (errors.Is and errors.As keep working). nil stays nil.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := r.String(msg)
	if out == msg {
		return err
	}
	if re, ok := err.(*redactedError); ok {
		err = re.err // no chains of redactions
	}
	return &redactedError{msg: out, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
