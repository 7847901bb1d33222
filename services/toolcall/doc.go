// Package toolcall is the mcpbus toolcall service: it executes tool calls
// (mcpbus.tools.call).
//
// # A call, in order
//
// Every entry point (mcpbus.tools.call, mcpbus.internal.call and a stdio
// call handed over by another replica) runs one pipeline of small steps,
// one function each; pipeline.go lists them. The call is one value from
// the entry point to the upstream client: its bus.Call in an upcall
// (callstate.go), passed to every step as a parameter and ending as
// mcpclient.CallOptions; no call data travels in context values.
//
//  1. Admission: a malformed request, or one carrying metadata.auth_token or
//     config.metadata.auth_token, is refused as invalid_request before
//     anything runs.
//  2. Guardrails (pkg/guardrails), on the visible name, before anything
//     else: guardrail_denied with the tool and the reason; the upstream
//     receives nothing. Before them, the caller's cap on calls in flight,
//     and after resolution the server's (inflight.go): rate_limited.
//  3. Resolution: the visible name is resolved through the caller's
//     discovery catalog of the current generation (one lookup of that
//     tool on mcpbus.internal.catalog, asked with the caller's user_id,
//     never the whole catalog; the tools found cached per user, dropped on
//     mcpbus.events.catalog, a newer KV generation or, for that user, a
//     personal connection event) to its server and raw name, never by
//     splitting a prefix. Unknown: not_found; deferred and not in the
//     caller's promoted list: tool_deferred. A tool the catalog marks as
//     personal (bus.Tool.Personal: discovery read its server from the
//     caller's personal connections) is looked up among the caller's own
//     personal connections (see below), any other in the deployment
//     config, whatever its name.
//  4. The server's interceptor chain (pkg/interceptors), built once per
//     enabled server on its first call, in the seed's order: OAuth
//     (mcpbus.internal.token), user_auth, the mcpInterceptors entries in
//     config order, headers_from_context last. The request starts with the
//     static headers, so precedence is static < OAuth < user_auth <
//     headers_from_context, one field per name whatever its spelling
//     (pkg/headers). Every name and value is checked once, by the source
//     that sets it; a refusal names the key and the reason, never the
//     value, and nothing is sent.
//  5. The upstream call on a pooled session, and the result passed through:
//     content blocks unchanged in kind, structuredContent as
//     structured_content, a tool error as is_error; the known secrets the
//     call carried are masked in it first (redact.go).
//
// # Sessions
//
// stdio sessions are pooled per (server, "user:thread"), created once even
// under concurrent first calls, bounded (Config.MaxSessions) with
// least-recently-used eviction, and closed per scope or server
// (SubjectSessionsClose) and on shutdown; a config change of their server
// retires them (closed once their calls in flight have returned), and a
// cache reset keeps them. Closing kills every descendant of the child (its
// session cgroup, or its process group plus the descendants that left it,
// see pkg/mcpclient). A
// crashed child is replaced before the next call; a failed or timed-out
// call closes its session. Children run in cwd or in the thread workspace
// with private TMPDIR/TMP/TEMP, and headers set by interceptors reach them
// as _meta.headers of tools/call.
//
// HTTP and SSE sessions are pooled per (server, fingerprint of the
// effective headers), so callers with different credentials never share
// one and a call does not initialize; an upstream that forgot the session
// gets one fresh initialize and one retry.
//
// tool_call_timeout bounds stdio calls and task-toolset calls; ordinary
// HTTP/SSE tools ignore it as the seed says (with a warning) and are bounded
// by the caller's deadline (timeout_ms or the NATS request's).
// session_init_timeout bounds connect + initialize (init_timeout).
//
// # Personal connections
//
// A user's own MCP servers (issue 7) are read from the api on
// mcpbus.internal.personal with the caller's user_id, checked to be that
// user's reply, parsed as an extensions document keyed by runtime name and
// cached per user until mcpbus.events.personal.<user> (an unreadable event
// drops every user's) or a new generation. A runtime name that is not one of
// the caller's enabled connections (another user's, an edited, disabled or
// deleted one, or any when the request has no user_id) is not_found; on
// mcpbus.internal.call it is a bus.PermanentCallError, so the task poller
// fails the task. An api that cannot be read is unavailable (retryable). A
// personal stdio server passes the personal launch policy again
// (launchpolicy.Personal, Config.Personal: off unless enabled, never in
// key-less mode, an operator's launch spec) before every spawn, whatever the
// api accepted when it was saved (config_error otherwise, nothing spawned);
// it runs what the policy gives: the exact command line, an environment
// built from the spec only, the owner's workspace <root>/personal/<hash> and,
// as root, the run-as uid. A personal OAuth token is asked for with Owner =
// the caller. Runtime names embed the user and the definition, so they key
// sessions and chains safely; after a personal event, a background sweep
// reads the user's connections again and closes the sessions of runtime
// names the user no longer has (all of the user's when the api cannot be
// read), leaving the unchanged ones open.
//
// Federation (federation.go): mcpbus.resources.read, mcpbus.prompts.get and
// mcpbus.completion.complete take the call pipeline with another invoke
// step; mcpbus.resources.subscribe and .unsubscribe (subscriptions.go) take
// it too, handed to the replica owning the connection for every transport,
// which keeps one upstream subscription per connection and raw URI and
// publishes the upstream's updates on mcpbus.resources.updated.<user>.
//
// Request secrets (context.secrets) are used for the call only: they are
// never logged, stored, sent to guardrail providers or external
// interceptors, or returned.
package toolcall
