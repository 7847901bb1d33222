package configedit

import (
	"net/url"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

// A stored secret that the body keeps ("***", or an oauth secret left out
// or null) is restored only while it would still go where it went: the
// origin (scheme, host and port) of url for headers and user_auth.users
// values, that of oauth.token_url for the oauth secrets, the command and
// args for env values and masked args. Otherwise moving the URL or the
// command would hand the stored secret to a new destination that the
// editor chose without ever knowing the secret.

// checkDestinations refuses an edit of a stored entry that keeps a stored
// secret whose destination the edit changes. It runs on the body as sent,
// before anything is restored. Errors are *EditError naming the field.
func checkDestinations(name string, body, stored *orderedjson.Object) error {
	sameURL := sameOrigin(body.Value("url"), stored.Value("url"))
	for _, f := range []string{"headers", "user_auth.users"} {
		if field := keptMasked(body, stored, f); field != "" && !sameURL {
			return destinationChanged(name, field, "url")
		}
	}
	sameProgram := body.Value("command") == stored.Value("command") && sameArgs(body.Value("args"), stored.Value("args"))
	if field := keptMasked(body, stored, "env"); field != "" && !sameProgram {
		return destinationChanged(name, field, "command or args")
	}
	if args, ok := argStrings(body.Value("args")); ok && argPlaceholder(args) >= 0 && body.Value("command") != stored.Value("command") {
		return destinationChanged(name, "args", "command")
	}
	bo, _ := objectAt(body, "oauth")
	so, _ := objectAt(stored, "oauth")
	if bo == nil || so == nil || sameOrigin(bo.Value("token_url"), so.Value("token_url")) {
		return nil
	}
	for _, k := range oauthSecretKeys {
		v, _ := bo.Get(k)
		if sv, _ := so.Get(k); sv != nil && (v == nil || v == config.MaskedValue) {
			return destinationChanged(name, "oauth."+k, "oauth.token_url")
		}
	}
	if field := keptMasked(bo, so, "extra_token_params"); field != "" {
		return destinationChanged(name, "oauth."+field, "oauth.token_url")
	}
	return nil
}

func destinationChanged(name, field, moved string) error {
	return editErrorf(EditInvalid, name, field,
		"MCP server '%s' field '%s': re-enter the secret: its destination changed (%s)", name, field, moved)
}

// keptMasked returns the first "path.key" of the object at path (dotted)
// in body whose value is the "***" placeholder for a key stored holds, or
// "". (A placeholder for a key stored lacks is refused by the merge.)
func keptMasked(body, stored *orderedjson.Object, path string) string {
	bo, so := body, stored
	for _, p := range strings.Split(path, ".") {
		var ok bool
		if bo, ok = objectAt(bo, p); !ok {
			return ""
		}
		if so, ok = objectAt(so, p); !ok {
			return ""
		}
	}
	for _, k := range bo.Keys() {
		if _, had := so.Get(k); had && bo.Value(k) == config.MaskedValue {
			return path + "." + k
		}
	}
	return ""
}

// sameOrigin reports whether two url values have the same scheme, host
// and port (a masked userinfo or query does not matter; a default port
// equals its absence).
func sameOrigin(a, b any) bool {
	return originOf(a) == originOf(b)
}

func originOf(v any) string {
	s, _ := v.(string)
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "invalid:" + s
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// sameArgs compares two args lists by their masked forms, so a body that
// sends the masked view of the stored args is the same program.
func sameArgs(a, b any) bool {
	as, aok := argStrings(a)
	bs, bok := argStrings(b)
	if a == nil || b == nil || !aok || !bok {
		return a == nil && b == nil
	}
	am, _ := config.MaskArgs(as)
	bm, _ := config.MaskArgs(bs)
	return slices.Equal(am, bm)
}
