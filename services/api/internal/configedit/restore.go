package configedit

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

// Restoring the secrets of an edited entry that a masked view (mask.go)
// replaced with "***": a URL's userinfo and query, and tokens in args.

// restoreURL merges an edited URL with the stored one: a body equal to
// the stored URL's masked form is the stored URL; otherwise each "***"
// part (userinfo, query, fragment) takes the stored part, but only while
// the scheme and host stay the same, so a masked credential never follows
// the URL to another host. A "***" with nothing stored to restore is
// refused.
func restoreURL(name, field string, stored any, body string) (string, error) {
	if !config.HasURLPlaceholder(body) {
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
	if body == config.MaskURL(prev) {
		return prev, nil
	}
	bu, err1 := url.Parse(body)
	su, err2 := url.Parse(prev)
	if err1 != nil || err2 != nil || body == config.MaskedValue {
		return refuse("(the stored URL cannot be kept in part)")
	}
	if !strings.EqualFold(bu.Scheme, su.Scheme) || !strings.EqualFold(bu.Host, su.Host) {
		return refuse("(the masked parts are kept only while the scheme and host stay the same)")
	}
	if config.MaskedUser(bu) {
		if su.User == nil {
			return refuse("(no userinfo is stored)")
		}
		bu.User = su.User
	}
	if bu.RawQuery == config.MaskedValue {
		if su.RawQuery == "" {
			return refuse("(no query string is stored)")
		}
		bu.RawQuery = su.RawQuery
	}
	if bu.Fragment == config.MaskedValue {
		if su.Fragment == "" {
			return refuse("(no fragment is stored)")
		}
		bu.Fragment, bu.RawFragment = su.Fragment, su.RawFragment
	}
	return bu.String(), nil
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
		return orderedjson.Clone(v)
	}
	masked, _ := config.MaskArgs(args)
	out := make([]any, len(masked))
	for i, m := range masked {
		out[i] = m
	}
	return out
}

// argPlaceholder returns the index of the first argument whose secret part
// is the "***" placeholder, or -1.
func argPlaceholder(args []string) int {
	masked, secret := config.MaskArgs(args)
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
	smasked, _ := config.MaskArgs(sargs)
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
