package config

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// routingFields parses a routing object (server level or tool override):
// only mode, priority and keywords; mode off|prefer; priority clamped to 0..100.
func (p *serverParser) routingFields(v any, field string) (RoutingOverride, bool) {
	var out RoutingOverride
	m, ok := p.object(v, field)
	if !ok {
		return out, false
	}
	p.unknownKeys(m, field, true, "mode", "priority", "keywords")
	if mode, ok := p.str(m, "mode", field+".mode"); ok {
		if mode != RoutingOff && mode != RoutingPrefer {
			p.errorf(field+".mode", "must be 'off' or 'prefer', got %q", mode)
		} else {
			out.Mode = &mode
		}
	}
	if prio, ok := p.integer(m, "priority", field+".priority"); ok {
		switch {
		case prio < 0:
			p.warnf(field+".priority", "MCP routing priority %d is below 0; clamping to 0.", prio)
			prio = 0
		case prio > 100:
			p.warnf(field+".priority", "MCP routing priority %d is above 100; clamping to 100.", prio)
			prio = 100
		}
		out.Priority = &prio
	}
	if _, present := m["keywords"]; present && m["keywords"] != nil {
		kw := p.strList(m, "keywords", field+".keywords")
		if kw == nil {
			kw = []string{}
		}
		out.Keywords = &kw
	}
	return out, true
}

// serverRouting applies the defaults {off, 0, []} to the server's routing.
func (p *serverParser) serverRouting(v any) Routing {
	r := Routing{Mode: RoutingOff, Keywords: []string{}}
	o, ok := p.routingFields(v, "routing")
	if !ok {
		return r
	}
	if o.Mode != nil {
		r.Mode = *o.Mode
	}
	if o.Priority != nil {
		r.Priority = *o.Priority
	}
	if o.Keywords != nil {
		r.Keywords = *o.Keywords
	}
	return r
}

// tools parses {rawToolName: {routing: {...}}}.
func (p *serverParser) tools(v any) map[string]ToolOverride {
	m, ok := p.object(v, "tools")
	if !ok {
		return nil
	}
	out := make(map[string]ToolOverride, len(m))
	for _, name := range sortedKeys(m) {
		field := "tools." + name
		tm, ok := p.object(m[name], field)
		if !ok {
			continue
		}
		p.unknownKeys(tm, field, false, "routing")
		var ov ToolOverride
		if r, ok := p.routingFields(tm["routing"], field+".routing"); ok {
			ov.Routing = &r
		}
		out[name] = ov
	}
	return out
}

var oauthKeys = []string{
	"enabled", "token_url", "grant_type", "client_id", "client_secret",
	"refresh_token", "scope", "audience", "token_field", "token_type_field",
	"expires_in_field", "default_token_type", "refresh_skew_seconds",
	"extra_token_params", "connect", "token_endpoint_auth_method",
}

// oauth parses the oauth block with its defaults.
func (p *serverParser) oauth(v any) *OAuth {
	m, ok := p.object(v, "oauth")
	if !ok {
		return nil
	}
	p.unknownKeys(m, "oauth", false, oauthKeys...)
	o := &OAuth{
		Enabled:            p.boolean(m, "enabled", "oauth.enabled", true),
		GrantType:          GrantClientCredentials,
		TokenField:         "access_token",
		TokenTypeField:     "token_type",
		ExpiresInField:     "expires_in",
		DefaultTokenType:   "Bearer",
		RefreshSkewSeconds: 60,
	}
	o.TokenURL, _ = p.str(m, "token_url", "oauth.token_url")
	if gt, _ := p.str(m, "grant_type", "oauth.grant_type"); gt != "" {
		if gt != GrantClientCredentials && gt != GrantRefreshToken && gt != GrantAuthorizationCode {
			p.errorf("oauth.grant_type", "must be 'client_credentials', 'refresh_token' or 'authorization_code', got %q", gt)
		}
		o.GrantType = gt
	}
	o.ClientID, _ = p.str(m, "client_id", "oauth.client_id")
	o.ClientSecret, _ = p.str(m, "client_secret", "oauth.client_secret")
	o.RefreshToken, _ = p.str(m, "refresh_token", "oauth.refresh_token")
	o.Scope, _ = p.str(m, "scope", "oauth.scope")
	o.Audience, _ = p.str(m, "audience", "oauth.audience")
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"token_field", &o.TokenField},
		{"token_type_field", &o.TokenTypeField},
		{"expires_in_field", &o.ExpiresInField},
		{"default_token_type", &o.DefaultTokenType},
	} {
		if s, _ := p.str(m, f.key, "oauth."+f.key); s != "" {
			*f.dst = s
		}
	}
	if skew, ok := p.integer(m, "refresh_skew_seconds", "oauth.refresh_skew_seconds"); ok {
		o.RefreshSkewSeconds = max(skew, 0)
	}
	o.ExtraTokenParams = p.strMap(m, "extra_token_params", "oauth.extra_token_params")
	o.Connect, _ = p.str(m, "connect", "oauth.connect")
	switch {
	case o.Connect == "":
		if o.GrantType == GrantAuthorizationCode {
			o.Connect = ConnectPerUser
		}
	case o.Connect != ConnectPerUser && o.Connect != ConnectShared:
		p.errorf("oauth.connect", "must be 'per_user' or 'shared', got %q", o.Connect)
	case o.GrantType != GrantAuthorizationCode:
		p.errorf("oauth.connect", "applies to grant_type 'authorization_code' only")
	}
	o.TokenEndpointAuthMethod, _ = p.str(m, "token_endpoint_auth_method", "oauth.token_endpoint_auth_method")
	switch o.TokenEndpointAuthMethod {
	case "", "client_secret_basic", "client_secret_post", "none":
	default:
		p.errorf("oauth.token_endpoint_auth_method", "must be 'client_secret_basic', 'client_secret_post' or 'none', got %q", o.TokenEndpointAuthMethod)
	}
	if o.GrantType == GrantAuthorizationCode {
		// The token endpoint comes from the server's metadata.
		return o
	}
	if o.Enabled && strings.TrimSpace(o.TokenURL) == "" {
		p.errorf("oauth.token_url", "is required when oauth is enabled")
	}
	return o
}

var taskRoles = []string{"submit_tool", "status_tool", "cancel_tool"}

// taskToolsets parses task_toolsets: names 1..255 chars, non-empty tool
// names, each raw tool in one role of one group, only the four keys.
func (p *serverParser) taskToolsets(v any) []TaskToolset {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		p.errorf("task_toolsets", "must be a list, got %s", jsonKind(v))
		return nil
	}
	var out []TaskToolset
	usedBy := map[string]string{} // raw tool -> "toolset.role"
	names := map[string]bool{}
	for i, item := range list {
		field := fmt.Sprintf("task_toolsets[%d]", i)
		m, ok := p.object(item, field)
		if !ok {
			if item == nil {
				p.errorf(field, "must be an object, got null")
			}
			continue
		}
		p.unknownKeys(m, field, true, append([]string{"name"}, taskRoles...)...)
		ts := TaskToolset{}
		ts.Name, _ = p.str(m, "name", field+".name")
		label := ts.Name
		if strings.TrimSpace(ts.Name) == "" || utf8.RuneCountInString(ts.Name) > MaxTaskToolsetNameChars {
			p.errorf(field+".name", "MCP task toolset name must contain 1 to %d characters and not be blank", MaxTaskToolsetNameChars)
			label = field
		} else if names[ts.Name] {
			p.errorf(field+".name", "MCP task toolset name '%s' is used more than once", ts.Name)
		}
		names[ts.Name] = true
		dst := map[string]*string{"submit_tool": &ts.SubmitTool, "status_tool": &ts.StatusTool, "cancel_tool": &ts.CancelTool}
		for _, role := range taskRoles {
			tool, _ := p.str(m, role, field+"."+role)
			if tool == "" {
				p.errorf(field+"."+role, "must name one of the server's raw tools (at least 1 character)")
				continue
			}
			where := label + "." + role
			if prev, dup := usedBy[tool]; dup {
				p.errorf(field+"."+role, "MCP task tool '%s' must be unique across task_toolsets and roles; it is configured as both %s and %s", tool, prev, where)
			} else {
				usedBy[tool] = where
			}
			*dst[role] = tool
		}
		out = append(out, ts)
	}
	return out
}

// headerBlock is the object of field f, a block that sets HTTP headers:
// absent gives false, and so does a stdio server's (ignored with a
// warning: it has no HTTP headers) or a value that is not an object.
func (p *serverParser) headerBlock(v any, transport, f string) (map[string]any, bool) {
	if v == nil {
		return nil, false
	}
	if transport == TransportStdio {
		p.warnf(f, "ignored: a stdio server has no HTTP headers")
		return nil, false
	}
	return p.object(v, f)
}

// headersFromContext parses headers_from_context; on stdio it is ignored
// with a warning.
func (p *serverParser) headersFromContext(v any, transport string) *HeadersFromContext {
	const f = "headers_from_context"
	m, ok := p.headerBlock(v, transport, f)
	if !ok {
		return nil
	}
	p.unknownKeys(m, f, false, "enabled", "headers", "on_missing")
	h := &HeadersFromContext{
		Enabled:   p.boolean(m, "enabled", f+".enabled", true),
		OnMissing: p.onMissing(m, f+".on_missing"),
	}
	hm, ok := p.object(m["headers"], f+".headers")
	if !ok {
		return h
	}
	h.Headers = make(map[string]string, len(hm))
	for _, name := range sortedKeys(hm) {
		if strings.TrimSpace(name) == "" {
			p.errorf(f+".headers", "must not contain a blank header name")
			continue
		}
		key, ok := hm[name].(string)
		if !ok || strings.TrimSpace(key) == "" {
			p.errorf(f+".headers", "header '%s' must name a non-blank secret key from config.context.secrets", name)
			continue
		}
		h.Headers[name] = key
	}
	p.headerSpellings(f+".headers", h.Headers)
	return h
}

// userAuth parses user_auth; on stdio it is ignored with a warning.
func (p *serverParser) userAuth(v any, transport string) *UserAuth {
	const f = "user_auth"
	m, ok := p.headerBlock(v, transport, f)
	if !ok {
		return nil
	}
	p.unknownKeys(m, f, false, "enabled", "header", "users", "on_missing")
	u := &UserAuth{
		Enabled:   p.boolean(m, "enabled", f+".enabled", true),
		Header:    DefaultUserAuthHeader,
		OnMissing: p.onMissing(m, f+".on_missing"),
	}
	if h, present := p.str(m, "header", f+".header"); present {
		if strings.TrimSpace(h) == "" {
			p.errorf(f+".header", "must not be blank")
		}
		u.Header = h
	}
	u.Users = p.strMap(m, "users", f+".users")
	return u
}

// quotas reads a server's quotas: a list of {calls, interval_seconds}
// and/or {concurrent} objects, with the rules of a virtual server's quotas
// (tools excepted: a server's quota counts all of its calls).
func (p *serverParser) quotas(v any) []Quota {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		p.errorf("quotas", "must be a list of {calls, interval_seconds} or {concurrent} objects, got %s", jsonKind(v))
		return nil
	}
	out := make([]Quota, 0, len(list))
	for i, item := range list {
		field := fmt.Sprintf("quotas[%d]", i)
		m, ok := p.object(item, field)
		if !ok {
			if item == nil {
				p.errorf(field, "must be an object, got null")
			}
			continue
		}
		p.unknownKeys(m, field, true, "calls", "interval_seconds", "concurrent")
		var q Quota
		q.Calls, _ = p.integer(m, "calls", field+".calls")
		q.IntervalSeconds, _ = p.integer(m, "interval_seconds", field+".interval_seconds")
		q.Concurrent, _ = p.integer(m, "concurrent", field+".concurrent")
		for _, msg := range quotaProblems(q) {
			p.errorf(field+msg.field, "%s", msg.text)
		}
		out = append(out, q)
	}
	return out
}
