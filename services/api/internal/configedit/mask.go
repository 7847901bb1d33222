package configedit

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

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
	v, err := orderedjson.Decode(entry)
	if err != nil {
		return nil, fmt.Errorf("mask server entry: %w", err)
	}
	return orderedjson.Encode(maskServer(v), false)
}

// MaskedServers returns the mcpServers object of an extensions file's bytes
// with every entry masked (MaskServerEntry), in file order; "{}" when data is
// empty or has no mcpServers. A name written twice keeps its first position
// and its last definition, as the parser does.
func MaskedServers(data []byte) (json.RawMessage, error) {
	servers, err := config.ServerEntries(data)
	if err != nil {
		return nil, err
	}
	out := orderedjson.NewObject()
	for _, name := range servers.Keys() {
		out.Set(name, maskServer(servers.Value(name)))
	}
	return orderedjson.Encode(out, false)
}

// maskServer masks a decoded server entry (a copy; v is not changed).
func maskServer(v any) any {
	srv, ok := v.(*orderedjson.Object)
	if !ok {
		return v
	}
	out := orderedjson.NewObject()
	for _, k := range srv.Keys() {
		val := srv.Value(k)
		switch {
		case k == "env" || k == "headers":
			out.Set(k, maskAllValues(val))
		case k == "url":
			out.Set(k, maskURLValue(val))
		case k == "args":
			out.Set(k, maskArgsValue(val))
		case k == "oauth":
			out.Set(k, maskOAuth(val))
		case k == "user_auth":
			out.Set(k, maskNested(val, "users"))
		case k == "headers_from_context" || config.IsKnownServerKey(k):
			out.Set(k, orderedjson.Clone(val))
		case config.IsSensitiveKey(k):
			out.Set(k, config.MaskedValue)
		default:
			out.Set(k, maskSensitive(val))
		}
	}
	return out
}

// maskURLValue masks a decoded URL value (MaskURL); non-strings are
// returned as they are.
func maskURLValue(v any) any {
	if u, ok := v.(string); ok {
		return config.MaskURL(u)
	}
	return orderedjson.Clone(v)
}

// maskAllValues turns every value of an object into "***"; anything but an
// object or null is masked whole.
func maskAllValues(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case *orderedjson.Object:
		out := orderedjson.NewObject()
		for _, k := range x.Keys() {
			out.Set(k, config.MaskedValue)
		}
		return out
	default:
		return config.MaskedValue
	}
}

// maskNested masks every value of v[field] (an object of secrets).
func maskNested(v any, field string) any {
	obj, ok := v.(*orderedjson.Object)
	if !ok {
		return orderedjson.Clone(v)
	}
	out := orderedjson.Clone(obj).(*orderedjson.Object)
	if inner, ok := out.Get(field); ok {
		out.Set(field, maskAllValues(inner))
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
	obj, ok := v.(*orderedjson.Object)
	if !ok {
		return orderedjson.Clone(v)
	}
	out := orderedjson.NewObject()
	for _, k := range obj.Keys() {
		val := obj.Value(k)
		switch {
		case slices.Contains(oauthSecretKeys, k):
			out.Set(k, nil)
		case k == "extra_token_params":
			out.Set(k, maskAllValues(val))
		case k == "token_url":
			out.Set(k, maskURLValue(val))
		case oauthTypedKeys[k]:
			out.Set(k, orderedjson.Clone(val))
		case config.IsSensitiveKey(k):
			out.Set(k, config.MaskedValue)
		default:
			out.Set(k, maskSensitive(val))
		}
	}
	return out
}

// maskSensitive masks, at any depth, the values of keys whose normalised
// name is a secret word.
func maskSensitive(v any) any {
	switch x := v.(type) {
	case *orderedjson.Object:
		out := orderedjson.NewObject()
		for _, k := range x.Keys() {
			if config.IsSensitiveKey(k) {
				out.Set(k, config.MaskedValue)
			} else {
				out.Set(k, maskSensitive(x.Value(k)))
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
