package api

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/pinning"
	"github.com/mcpbus/mcpbus/pkg/store"
)

// The OpenAPI 3.1 document served at /api/openapi.json, written by hand. A
// test checks that every registered route appears in it; a new route needs
// its entry here.

type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func jsonBody(schema obj) obj {
	return obj{"content": obj{"application/json": obj{"schema": schema}}}
}

func response(desc string, schema obj) obj {
	r := jsonBody(schema)
	r["description"] = desc
	return r
}

// errs are the error responses of an operation, each {"error": {code, message}}.
func errs(statuses ...int) obj {
	out := obj{}
	for _, st := range statuses {
		out[strconv.Itoa(st)] = response(http.StatusText(st), ref("ErrorReply"))
	}
	return out
}

type opSpec struct {
	summary   string
	tag       string
	public    bool
	admin     bool
	params    []obj
	body      obj
	ok        int
	okDesc    string
	okSchema  obj
	errStatus []int
}

func (o opSpec) build() obj {
	op := obj{"summary": o.summary, "tags": []string{o.tag}}
	if o.admin {
		op["description"] = "Admin only: a caller with role user gets 403."
	}
	if o.public {
		op["security"] = []any{}
	}
	if len(o.params) > 0 {
		op["parameters"] = o.params
	}
	if o.body != nil {
		b := jsonBody(o.body)
		b["required"] = true
		op["requestBody"] = b
	}
	responses := errs(o.errStatus...)
	if !o.public {
		for k, v := range errs(http.StatusUnauthorized) {
			responses[k] = v
		}
	}
	if o.admin {
		for k, v := range errs(http.StatusForbidden) {
			responses[k] = v
		}
	}
	ok := o.ok
	if ok == 0 {
		ok = http.StatusOK
	}
	responses[strconv.Itoa(ok)] = response(o.okDesc, o.okSchema)
	op["responses"] = responses
	return op
}

func pathParam(name, desc string) obj {
	return obj{"name": name, "in": "path", "required": true, "description": desc, "schema": obj{"type": "string"}}
}

func queryParam(name, desc string) obj {
	return obj{"name": name, "in": "query", "required": false, "description": desc, "schema": obj{"type": "string"}}
}

var anyObject = obj{"type": "object", "additionalProperties": true}

// pageParams are ?search=, ?offset= and ?limit= of a paged list of what
// (its entries' fields searched).
func pageParams(what, fields string) []obj {
	return []obj{queryParam("search", "with search, offset or limit: only the "+what+" whose "+fields+" contains this (case-insensitive), one page at a time, and the reply adds total, offset and limit"),
		queryParam("offset", "the first match of the page (default 0)"), queryParam("limit", "entries per page, 1..500 (default 50)")}
}

// virtualParam names a virtual server (docs/virtual-servers.md).
var virtualParam = queryParam("virtual", "a virtual server: its view of the catalog; required for a key bound to virtual servers")

func openAPIDocument() obj {
	connName := pathParam("name", "the connection's name")
	paths := obj{
		"/healthz": obj{"get": opSpec{summary: "Liveness", tag: "health", public: true, okDesc: "alive", okSchema: anyObject}.build()},
		"/readyz": obj{"get": opSpec{summary: "Readiness: NATS, the KV bucket and the database", tag: "health", public: true,
			okDesc: "ready", okSchema: anyObject, errStatus: []int{http.StatusServiceUnavailable}}.build()},
		"/metrics": obj{"get": func() obj {
			op := opSpec{summary: "Prometheus metrics: request counts and latencies per route (an admin key when API keys are set)", tag: "health", admin: true, okDesc: "metrics"}.build()
			op["responses"] = obj{"200": obj{"description": "Prometheus text format", "content": obj{"text/plain": obj{"schema": obj{"type": "string"}}}}}
			return op
		}()},
		"/api/openapi.json": obj{"get": opSpec{summary: "This document (any valid key when API keys are set)", tag: "health", okDesc: "OpenAPI 3.1", okSchema: anyObject}.build()},
		"/api/mcp/tools": obj{"get": opSpec{summary: "The caller's catalog (as mcpbus.tools.list)", tag: "tools",
			params: []obj{queryParam("thread_id", "the thread"), queryParam("q", "the latest user message, for routing"),
				queryParam("search", "with search, offset or limit: only tools whose name, server or description contains this (case-insensitive), one page at a time, and the reply adds total, offset and limit"),
				queryParam("offset", "the first matching tool of the page (default 0)"), queryParam("limit", "tools per page, 1..500 (default 50)"), virtualParam},
			okDesc: "the catalog", okSchema: ref("ToolsListReply"), errStatus: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable, http.StatusGatewayTimeout}}.build()},
		"/api/mcp/tools/{name}/call": obj{"post": opSpec{summary: "Call a tool (as mcpbus.tools.call)", tag: "tools",
			params: []obj{pathParam("name", "the tool's visible name (in the virtual server, when one is named)"), virtualParam}, body: ref("ToolCallBody"),
			okDesc: "the tool result", okSchema: anyObject,
			errStatus: []int{400, 403, 404, 409, 413, 422, 429, 502, 503, 504}}.build()},
		"/api/mcp/resources": obj{"get": opSpec{summary: "The caller's resources and resource templates, URIs visible (mcpbus://<server>/<uri>, ui://<server>/<path>)", tag: "federation",
			params: append([]obj{queryParam("thread_id", "the thread"), virtualParam}, pageParams("resources then templates (one sequence)", "uri or uriTemplate, name, title, description or server")...),
			okDesc: "resources and templates", okSchema: anyObject, errStatus: []int{403, 404, 503, 504}}.build()},
		"/api/mcp/resources/read": obj{"post": opSpec{summary: "Read a resource by its visible URI (as mcpbus.resources.read); an unmapped URI is 404", tag: "federation", params: []obj{virtualParam},
			body: obj{"type": "object", "required": []string{"uri"}, "properties": obj{"uri": obj{"type": "string"}, "thread_id": obj{"type": "string"},
				"context": anyObject, "metadata": anyObject, "timeout_ms": obj{"type": "integer"}}},
			okDesc: "{uri, server, contents}", okSchema: anyObject, errStatus: []int{400, 403, 404, 413, 422, 502, 503, 504}}.build()},
		"/api/mcp/prompts": obj{"get": opSpec{summary: "The caller's prompts, named like tools (as mcpbus.prompts.list)", tag: "federation",
			params: append([]obj{queryParam("thread_id", "the thread"), virtualParam}, pageParams("prompts", "name, title, description or server")...),
			okDesc: "prompts", okSchema: anyObject, errStatus: []int{403, 404, 503, 504}}.build()},
		"/api/mcp/prompts/{name}": obj{
			"get": opSpec{summary: "One prompt's definition", tag: "federation", params: []obj{pathParam("name", "the prompt's visible name"), virtualParam},
				okDesc: "{name, server, original_name, title?, description?, arguments}", okSchema: anyObject, errStatus: []int{403, 404, 503, 504}}.build(),
			"post": opSpec{summary: "Get a prompt with arguments (as mcpbus.prompts.get)", tag: "federation", params: []obj{pathParam("name", "the prompt's visible name"), virtualParam},
				body: obj{"type": "object", "properties": obj{"arguments": obj{"type": "object", "additionalProperties": obj{"type": "string"}}, "thread_id": obj{"type": "string"},
					"context": anyObject, "metadata": anyObject, "timeout_ms": obj{"type": "integer"}}},
				okDesc: "{name, server, description?, messages}", okSchema: anyObject, errStatus: []int{400, 403, 404, 413, 422, 502, 503, 504}}.build(),
		},
		"/api/mcp/completion": obj{"post": opSpec{summary: "Complete a prompt or resource template argument (as mcpbus.completion.complete)", tag: "federation", params: []obj{virtualParam},
			body: obj{"type": "object", "required": []string{"ref", "argument"}, "properties": obj{"ref": anyObject, "argument": anyObject,
				"context_arguments": obj{"type": "object", "additionalProperties": obj{"type": "string"}}, "thread_id": obj{"type": "string"}, "context": anyObject}},
			okDesc: "{server, completion}", okSchema: anyObject, errStatus: []int{400, 403, 404, 413, 502, 503, 504}}.build()},
		"/api/mcp/cache/reset": obj{"post": opSpec{summary: "Reset the tool caches of every replica", tag: "tools", admin: true,
			okDesc: "the new generation is written; each server is rediscovered in the background", okSchema: ref("CacheResetReply"), errStatus: []int{503, 504}}.build()},
		"/api/mcp/servers": obj{"get": opSpec{summary: "Per-server status: enabled, transport, state, last error, the redacted stderr tail of a failed stdio server, tool count, discovered_at, generation", tag: "config", admin: true,
			params: []obj{queryParam("refresh", "\"false\" serves the last discovery without refreshing")},
			okDesc: "server status", okSchema: anyObject, errStatus: []int{503, 504}}.build()},
		"/api/mcp/virtual-servers": obj{"get": opSpec{summary: "Every virtual server: config.yaml's (source config.yaml, read-only here) and the admin API's (source api), with servers, tools, overrides, tool_search, quotas and pinning", tag: "config", admin: true,
			okDesc: "{virtual_servers: [VirtualServer + source, shadowed?], revision}", okSchema: anyObject, errStatus: []int{503}}.build()},
		"/api/mcp/virtual-servers/{name}": obj{
			"get": opSpec{summary: "One virtual server", tag: "config", admin: true, params: []obj{pathParam("name", "the virtual server's name")},
				okDesc: "the virtual server and its source", okSchema: ref("VirtualServer"), errStatus: []int{404, 503}}.build(),
			"put": opSpec{summary: "Create (201) or replace (200) a virtual server of the admin API, checked with config.yaml's rules (422 naming the field); config.yaml's sets are 409; every api, discovery and toolcall replica applies it without a restart; audited", tag: "config", admin: true,
				params: []obj{pathParam("name", "the virtual server's name: 1 to 64 letters, digits, '-' or '_'")}, body: ref("VirtualServer"),
				okDesc: "the virtual server as stored", okSchema: ref("VirtualServer"), errStatus: []int{400, 409, 413, 422, 503}}.build(),
			"delete": func() obj {
				op := opSpec{summary: "Delete a virtual server of the admin API (config.yaml's are 409); keys bound to it can use nothing through it; audited", tag: "config", admin: true,
					params: []obj{pathParam("name", "the virtual server's name")}, ok: http.StatusNoContent, okDesc: "deleted", errStatus: []int{404, 409, 503}}.build()
				op["responses"].(obj)["204"] = obj{"description": "deleted"}
				return op
			}(),
		},
		"/api/mcp/audit": obj{"get": opSpec{summary: "The newest audit records (tool calls and config changes through the API), oldest first; never arguments, headers, results or config values", tag: "config", admin: true,
			params: []obj{queryParam("user", "only this user's records"), queryParam("tool", "only calls of this tool"),
				queryParam("kind", audit.KindsText), queryParam("since", "only records from this RFC 3339 time on"), queryParam("limit", "1..1000, default 100")},
			okDesc: "audit records", okSchema: anyObject, errStatus: []int{400, 503}}.build()},
		"/api/mcp/stats/calls": obj{"get": opSpec{summary: "Tool calls and failed calls (any outcome but ok) per minute over the last minutes, counted from the audit stream (every replica's calls): the deployment's for an admin, the caller's own otherwise", tag: "config",
			params: []obj{queryParam("minutes", "1..60, default 10")},
			okDesc: "{scope: deployment|caller, minutes: [{start, calls, errors}]}, oldest first", okSchema: anyObject, errStatus: []int{400, 503}}.build()},
		"/api/mcp/audit/stream": obj{"get": sseOp(opSpec{summary: "Follow the audit log: the newest records matching the filters of GET /api/mcp/audit, then each new one, as server-sent events (one JSON record per data line)", tag: "config", admin: true,
			params: []obj{queryParam("user", "only this user's records"), queryParam("tool", "only calls of this tool"),
				queryParam("kind", audit.KindsText), queryParam("since", "only records from this RFC 3339 time on"), queryParam("limit", "1..1000, default 100")},
			okDesc: "an SSE stream", errStatus: []int{400, 503}})},
		"/api/console/session": obj{
			"post": opSpec{summary: "Console sign-in: exchange an API key for an HttpOnly, SameSite=Strict session cookie (Secure under TLS) and a CSRF token that every change made with the cookie must send as X-CSRF-Token; key-less mode answers the admin default without a cookie", tag: "console", public: true,
				body: ref("SignInBody"), okDesc: "signed in", okSchema: ref("ConsoleSession"), errStatus: []int{400, 401, 503}}.build(),
			"get": opSpec{summary: "The signed-in identity and, for a cookie session, its CSRF token and expiry", tag: "console",
				okDesc: "the identity", okSchema: ref("ConsoleSession"), errStatus: []int{503}}.build(),
			"delete": opSpec{summary: "Sign out: the session ends on every replica and the cookie is cleared (X-CSRF-Token required with the cookie)", tag: "console",
				ok: http.StatusNoContent, okDesc: "signed out", okSchema: anyObject, errStatus: []int{503}}.build(),
		},
		"/ui": obj{"get": func() obj {
			op := opSpec{summary: "Redirects to the console at /ui/", tag: "console", public: true, okDesc: "unused"}.build()
			op["responses"] = obj{"301": obj{"description": "to /ui/"}}
			return op
		}()},
		"/ui/*": obj{"get": func() obj {
			op := opSpec{summary: "The web console: its pages (index.html), scripts and style sheet, with a strict Content-Security-Policy", tag: "console", public: true, okDesc: "unused"}.build()
			op["responses"] = obj{"200": obj{"description": "text/html, text/javascript or text/css", "content": obj{"text/html": obj{"schema": obj{"type": "string"}}}},
				"404": obj{"description": "no such file"}}
			return op
		}()},
		"/api/mcp/pins": obj{"get": opSpec{summary: "Tool pins (docs/tool-pinning.md): by default the changed and new tool definitions waiting for approval, each with its diff against the approved definition and its flags", tag: "config", admin: true,
			params: []obj{queryParam("state", "pending (default), blocked, rejected, approved, removed or all"), queryParam("limit", "1..1000, default 100")},
			okDesc: "pins", okSchema: ref("PinList"), errStatus: []int{400, 503}}.build()},
		"/api/mcp/pins/approve": obj{"post": opSpec{summary: "Approve the waiting definition of a tool (the digest reviewed); audited; every discovery replica serves it next", tag: "config", admin: true,
			body: ref("PinDecision"), okDesc: "the pin after the decision", okSchema: ref("Pin"), errStatus: []int{400, 404, 409, 503}}.build()},
		"/api/mcp/pins/reject": obj{"post": opSpec{summary: "Reject the waiting definition of a tool: it stays withheld (the approved definition, if any, keeps serving) until the server lists another; audited", tag: "config", admin: true,
			body: ref("PinDecision"), okDesc: "the pin after the decision", okSchema: ref("Pin"), errStatus: []int{400, 404, 409, 503}}.build()},
		"/api/mcp/config": obj{
			"get": opSpec{summary: "The extensions config's servers as written ($VAR placeholders), secrets masked", tag: "config", admin: true,
				okDesc: "masked servers", okSchema: ref("ConfigServers"), errStatus: []int{503}}.build(),
			"put": opSpec{summary: "Replace the server set; \"***\" (or null for oauth secrets) keeps a stored secret; new and changed servers must pass the config rules (422); a task server's restart fields are refused (409); 200 once stored in the KV bucket, else 503", tag: "config", admin: true,
				body: ref("ConfigServers"), okDesc: "masked servers after the write", okSchema: ref("ConfigServers"),
				errStatus: []int{400, 413, 422, 503}}.build(),
			"patch": opSpec{summary: "Enable or disable one server (only that flag changes); enabling applies the config rules", tag: "config", admin: true,
				body: ref("ConfigPatch"), okDesc: "masked servers after the write", okSchema: ref("ConfigServers"),
				errStatus: []int{400, 404, 422, 503}}.build(),
		},
		"/api/threads/{thread_id}/mcp-tasks": obj{"get": opSpec{summary: "The caller's durable MCP tasks in a thread, newest first", tag: "tasks",
			params: []obj{pathParam("thread_id", "the thread (^[A-Za-z0-9_-]{1,64}$)"), queryParam("limit", "1..100, default 50; anything else is 422")},
			okDesc: "tasks", okSchema: ref("TaskList"), errStatus: []int{400, 422, 503}}.build()},
		"/api/threads/{thread_id}/mcp-tasks/{task_id}": obj{"get": opSpec{summary: "One of the caller's tasks with its detail fields", tag: "tasks",
			params: []obj{pathParam("thread_id", "the thread"), pathParam("task_id", "the task id")},
			okDesc: "the task", okSchema: ref("TaskDetail"), errStatus: []int{400, 404, 503}}.build()},
		"/api/threads/{thread_id}/mcp-tasks/{task_id}/cancel": obj{"post": opSpec{summary: "Request cancellation (the poller makes the remote call); repeating it changes nothing; a terminal task is returned unchanged", tag: "tasks",
			params: []obj{pathParam("thread_id", "the thread"), pathParam("task_id", "the task id")},
			okDesc: "the task", okSchema: ref("TaskDetail"), errStatus: []int{400, 404, 503}}.build()},
		"/api/mcp/tasks": obj{"get": opSpec{summary: "The caller's durable MCP tasks over every thread, newest first; each item carries its thread_id", tag: "tasks",
			params: []obj{queryParam("limit", "1..100, default 50; anything else is 422")},
			okDesc: "tasks", okSchema: ref("TaskList"), errStatus: []int{400, 422, 503}}.build()},
		"/api/mcp/tasks/stream": obj{"get": sseOp(opSpec{summary: "Follow task events (a task needs input, ends, or its tracking degrades) as server-sent events, one JSON event (task fields, thread_id, user_id, event_version) per data line: the caller's own tasks, every user's for an admin", tag: "tasks",
			okDesc: "an SSE stream", errStatus: []int{503}})},
		"/api/mcp/personal-connections": obj{
			"get": opSpec{summary: "The caller's personal MCP servers, secrets masked", tag: "personal",
				okDesc: "connections", okSchema: ref("PersonalList"), errStatus: []int{503}}.build(),
			"post": opSpec{summary: "Create or replace one of the caller's personal MCP servers (same schema and launch policy as the config; no $VAR strings, no cwd)", tag: "personal",
				body: ref("PersonalBody"), ok: http.StatusCreated, okDesc: "created (200 when replaced)", okSchema: ref("PersonalConnection"),
				errStatus: []int{400, 409, 413, 422, 503}}.build(),
		},
		"/api/mcp/personal-connections/{name}": obj{
			"get": opSpec{summary: "One of the caller's personal MCP servers, secrets masked", tag: "personal", params: []obj{connName},
				okDesc: "the connection", okSchema: ref("PersonalConnection"), errStatus: []int{404, 503}}.build(),
			"delete": opSpec{summary: "Delete one of the caller's personal MCP servers and its OAuth token row", tag: "personal", params: []obj{connName},
				okDesc: "deleted", okSchema: ref("PersonalDeleted"), errStatus: []int{404, 503}}.build(),
		},
	}
	server := pathParam("server", "a deployment server, or the runtime name of one of the caller's personal connections")
	paths["/api/mcp/connections"] = obj{"get": opSpec{summary: "The caller's connections on servers whose accounts people connect (oauth.grant_type authorization_code): state connected, needs_auth or error, issuer, scopes, expiry, and a link when not connected", tag: "connections",
		okDesc: "connections", okSchema: ref("OAuthConnectionList"), errStatus: []int{503}}.build()}
	paths["/api/mcp/connections/{server}/authorize"] = obj{"post": opSpec{summary: "Start connecting the caller's account (an admin's, for a shared server): the authorization URL to open in a browser", tag: "connections",
		params: []obj{server}, okDesc: "the link", okSchema: ref("OAuthAuthorizeReply"), errStatus: []int{400, 403, 404, 502, 503}}.build()}
	paths["/api/mcp/connections/{server}"] = obj{"delete": opSpec{summary: "Disconnect: revoke the tokens at the authorization server (RFC 7009, where offered) and forget them", tag: "connections",
		params: []obj{server}, okDesc: "the connection, now needs_auth", okSchema: ref("OAuthConnection"), errStatus: []int{400, 403, 404, 503}}.build()}
	paths["/oauth/callback"] = obj{"get": opSpec{summary: "Where the authorization server sends the browser back (state, code, iss): an HTML page saying whether the account is connected; no API key (the single-use state is the credential)", tag: "connections", public: true,
		params: []obj{queryParam("state", "the flow's state"), queryParam("code", "the authorization code"), queryParam("iss", "the issuer (RFC 9207)")},
		okDesc: "the result page (text/html)", errStatus: []int{400, 502, 503}}.build()}
	paths["/oauth/client-metadata.json"] = obj{"get": opSpec{summary: "mcpbus's OAuth client ID metadata document (its URL is the client_id with servers that support them)", tag: "connections", public: true,
		okDesc: "the document", okSchema: anyObject, errStatus: []int{404}}.build()}
	for path, ops := range mcpOpenAPIPaths() {
		paths[path] = ops
	}
	browserRules(paths)
	str := obj{"type": "string"}
	schemas := obj{
		"ErrorReply": obj{"type": "object", "required": []string{"error"}, "properties": obj{
			"error": obj{"type": "object", "required": []string{"code", "message"}, "properties": obj{
				"code": obj{"type": "string", "enum": []string{"invalid_request", "unauthorized", "forbidden", "not_found",
					"tool_deferred", "guardrail_denied", "credentials_missing", "credentials_invalid", "oauth_failed", "auth_required",
					"upstream_error", "upstream_timeout", "init_timeout", "config_error", "unavailable", "internal"}},
				"message": str,
				"details": anyObject,
			}},
		}},
		"ConfigServers": obj{"type": "object", "required": []string{"mcp_servers"}, "properties": obj{
			"mcp_servers": obj{"type": "object", "description": "server name → mcpServers entry (extensions_config.json schema)", "additionalProperties": anyObject},
		}},
		"ConfigPatch": obj{"type": "object", "required": []string{"server_name", "enabled"}, "properties": obj{
			"server_name": obj{"type": "string", "minLength": 1}, "enabled": obj{"type": "boolean"},
		}},
		"PersonalBody": obj{"type": "object", "required": []string{"name", "server"}, "properties": obj{
			"name":   obj{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
			"server": obj{"type": "object", "description": "an mcpServers entry", "additionalProperties": true},
		}},
		"PersonalConnection": obj{"type": "object", "properties": obj{
			"name": str, "runtime_name": obj{"type": "string", "pattern": "^p_[0-9a-f]{12}$"},
			"server":     obj{"type": "object", "description": "the entry, secrets masked", "additionalProperties": true},
			"created_at": obj{"type": "string", "format": "date-time"}, "updated_at": obj{"type": "string", "format": "date-time"},
		}},
		"PersonalList": obj{"type": "object", "properties": obj{"connections": obj{"type": "array", "items": ref("PersonalConnection")}}},
		"OAuthConnection": obj{"type": "object", "required": []string{"server", "mode", "state"}, "properties": obj{
			"server": str, "mode": obj{"type": "string", "enum": []string{"per_user", "shared", "personal"}},
			"state":  obj{"type": "string", "enum": []string{"connected", "needs_auth", "error"}},
			"issuer": str, "scopes": str, "authorize_url": str, "error": str,
			"expires_at": obj{"type": "string", "format": "date-time"}, "connected_at": obj{"type": "string", "format": "date-time"},
		}},
		"OAuthConnectionList": obj{"type": "object", "properties": obj{"connections": obj{"type": "array", "items": ref("OAuthConnection")}}},
		"OAuthAuthorizeReply": obj{"type": "object", "properties": obj{
			"server": str, "authorize_url": str, "expires_at": obj{"type": "string", "format": "date-time"},
		}},
		"PersonalDeleted": obj{"type": "object", "properties": obj{
			"name": str, "runtime_name": str, "deleted": obj{"type": "boolean"},
		}},
		"ToolsListReply": obj{"type": "object", "properties": obj{
			"generation": obj{"type": "integer"}, "catalog_hash": str, "revision": str, "tools": obj{"type": "array", "items": anyObject},
			"bind": obj{"type": "array", "items": str}, "promoted": obj{"type": "array", "items": str},
			"routing_hints": str, "deferred_section": str, "failed_servers": obj{"type": "array", "items": anyObject},
		}},
		"VirtualServer": obj{"type": "object", "additionalProperties": false, "required": []string{"servers"}, "properties": obj{
			"name": obj{"type": "string", "description": "the path's name (may be left out)"}, "description": str,
			"servers":     obj{"type": "array", "items": str, "minItems": 1},
			"tools":       obj{"type": "array", "items": str, "description": "names or path.Match globs over catalog names; none: every tool of the servers"},
			"overrides":   obj{"type": "object", "additionalProperties": obj{"type": "object", "properties": obj{"name": str, "description": str, "annotations": anyObject, "routing": anyObject}}},
			"tool_search": obj{"type": "boolean"},
			"quotas": obj{"type": "array", "items": obj{"type": "object", "properties": obj{
				"tools": obj{"type": "array", "items": str}, "calls": obj{"type": "integer"}, "interval_seconds": obj{"type": "integer"}, "concurrent": obj{"type": "integer"}}}},
			"pinning":  obj{"type": "string", "description": "config.yaml only; refused (422) by PUT"},
			"source":   obj{"type": "string", "enum": []string{"config.yaml", "api"}, "readOnly": true},
			"shadowed": obj{"type": "boolean", "readOnly": true},
		}},
		"PinDecision": obj{"type": "object", "required": []string{"server", "tool", "digest"}, "properties": obj{
			"server": obj{"type": "string", "minLength": 1}, "tool": obj{"type": "string", "minLength": 1},
			"digest": obj{"type": "string", "minLength": 1, "description": "the pending_digest reviewed; another is 409"},
		}},
		"Pin": obj{"type": "object", "properties": obj{
			"server": str, "tool": str, "owner": str, "policy": obj{"type": "string", "enum": pinning.PolicyNames()},
			"state": obj{"type": "string", "enum": store.PinStates()}, "approved_digest": str, "pending_digest": str,
			"diff": obj{"type": "object", "properties": obj{
				"new":         obj{"type": "boolean"},
				"changes":     obj{"type": "array", "items": obj{"type": "object", "properties": obj{"field": str, "old": obj{}, "new": obj{}}}},
				"flags":       obj{"type": "array", "items": obj{"type": "object", "properties": obj{"kind": str, "evidence": str}}},
				"descriptive": obj{"type": "boolean"},
			}},
			"generation": obj{"type": "integer"}, "decided_by": str,
			"decided_at": obj{"type": []string{"string", "null"}, "format": "date-time"}, "updated_at": obj{"type": "string", "format": "date-time"},
		}},
		"PinList": obj{"type": "object", "properties": obj{"pins": obj{"type": "array", "items": ref("Pin")}}},
		"ToolCallBody": obj{"type": "object", "properties": obj{
			"arguments": anyObject, "thread_id": str, "run_id": str,
			"digest":     obj{"type": "string", "description": "the tool's digest as listed; a tool that changed since is refused (409 tool_changed)"},
			"context":    obj{"type": "object", "properties": obj{"secrets": obj{"type": "object", "additionalProperties": str}}},
			"metadata":   obj{"type": "object", "description": "must not contain auth_token (422)"},
			"timeout_ms": obj{"type": "integer", "minimum": 0, "description": "the call's deadline; the api waits at most timeout_ms + 2000 for an answer, then 504 upstream_timeout"},
		}},
		"SignInBody": obj{"type": "object", "required": []string{"api_key"}, "properties": obj{"api_key": str}},
		"ConsoleSession": obj{"type": "object", "properties": obj{
			"user_id": str, "role": obj{"type": "string", "enum": []string{"admin", "user"}}, "keyless": obj{"type": "boolean"},
			"csrf_token": str, "expires_at": obj{"type": "string", "format": "date-time"},
		}},
		"TaskItem": obj{"type": "object", "properties": obj{
			"task_id": str, "task_name": str, "status": obj{"type": "string", "enum": store.TaskStatuses()},
			"created_at": obj{"type": "string", "format": "date-time"}, "updated_at": obj{"type": "string", "format": "date-time"},
			"error": obj{"type": []string{"string", "null"}}, "tracking_degraded": obj{"type": "boolean"}, "cancel_requested": obj{"type": "boolean"},
		}},
		"TaskList": obj{"type": "object", "properties": obj{"tasks": obj{"type": "array", "items": ref("TaskItem")}}},
		"TaskDetail": obj{"allOf": []any{ref("TaskItem"), obj{"type": "object", "properties": obj{
			"last_polled_at": obj{"type": []string{"string", "null"}, "format": "date-time"}, "last_poll_error": obj{"type": []string{"string", "null"}},
			"last_cancel_error": obj{"type": []string{"string", "null"}}, "cancel_attempt_count": obj{"type": "integer"},
			"notification_status": str, "notification_error": obj{"type": []string{"string", "null"}}, "notification_attempt_count": obj{"type": "integer"},
			"result": obj{}, "result_preview": obj{"type": []string{"string", "null"}}, "result_truncated": obj{"type": "boolean"},
			"result_artifact": obj{}, "input_required": obj{},
			"result_format": obj{"type": "string", "enum": []string{"mcp_call_tool_result"}, "description": "present when result is the upstream's MCP CallToolResult (a tool with native MCP task support)"},
		}}}},
		"CacheResetReply": obj{"type": "object", "description": "Sent only once the new generation is durably in the KV bucket; otherwise 503 with Retry-After and nothing is reset.", "properties": obj{
			"success": obj{"type": "boolean"}, "message": str, "scope": obj{"type": "string", "enum": []string{"shared_config"}},
			"generation": obj{"type": "integer", "description": "the new cache generation; generations only increase"},
			"acknowledged": obj{"type": "object", "description": "per service, its live replicas and how many have applied the generation",
				"additionalProperties": obj{"type": "object", "properties": obj{"replicas": obj{"type": "integer"}, "acknowledged": obj{"type": "integer"}}}},
		}},
	}
	return obj{
		"openapi": "3.1.0",
		"info": obj{"title": "mcpbus REST API", "version": "0.1.0",
			"description": "The REST API for the agent UI. Failures are {\"error\": {code, message}}."},
		"security": []any{obj{"bearer": []string{}}, obj{"console": []string{}}},
		"paths":    paths,
		"components": obj{
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer", "description": "an API key from config.yaml"},
				"console": obj{"type": "apiKey", "in": "cookie", "name": SessionCookie, "description": "a console sign-in (POST /api/console/session); changes also need the X-CSRF-Token header"}},
			"schemas": schemas,
		},
	}
}

func (s *Service) openAPI(c echo.Context) error {
	return c.JSON(http.StatusOK, s.openapi)
}

// browserRules documents the checks of package httpguard on every
// operation: 403 for a non-loopback Host or a cross-site Origin when no API
// keys are configured, 415 for a POST, PUT or PATCH that is not
// application/json.
func browserRules(paths obj) {
	for _, p := range paths {
		for method, op := range p.(obj) {
			responses := op.(obj)["responses"].(obj)
			responses["403"] = response("Forbidden (also: with no API keys, a Host that is not loopback or a cross-site Origin)", ref("ErrorReply"))
			if method == "post" || method == "put" || method == "patch" {
				responses["415"] = response("Content-Type is not application/json (required even with an empty body)", ref("ErrorReply"))
			}
		}
	}
}

// sseOp is op answered by a server-sent events stream.
func sseOp(op opSpec) obj {
	o := op.build()
	o["responses"].(obj)["200"] = obj{"description": "text/event-stream", "content": obj{"text/event-stream": obj{"schema": obj{"type": "string"}}}}
	return o
}
