// Package mcpclient is the one adapter over mcp-go (github.com/mark3labs/mcp-go)
// that every mcpbus service uses to talk to upstream MCP servers.
//
// # Use
//
//	c, err := mcpclient.Connect(ctx, mcpclient.Spec{Server: "files", Transport: "stdio", Command: "npx", Args: args})
//	if err != nil { … }
//	defer c.Close()
//	tools, err := c.ListTools(ctx)
//	res, err := c.CallTool(callCtx, "read_file", json.RawMessage(`{"path":"a.txt"}`), nil)
//
// [Connect] starts the transport (spawning the child for stdio) and performs
// the initialize handshake. Its ctx bounds only that setup; the connection
// itself lives until [Client.Close]. Every later call takes its own ctx, and
// a deadline on it is the call's timeout: the error then satisfies
// errors.Is(err, context.DeadlineExceeded) and the client stays usable.
// A Client is safe for concurrent use.
//
// # What the adapter takes care of
//
//   - Protocol eras ([Era]): Connect probes each origin once with
//     server/discover and speaks 2026-07-28 (stateless: no initialize, no
//     session id, per-request _meta, Mcp-Method/Mcp-Name over HTTP) only
//     when its supportedVersions lists it; otherwise 2025-11-25 with
//     initialize, as before (a server that refuses the probe, or an SDK
//     shim that answers it without 2026-07-28). The era is cached per
//     origin in the service's [EraCache] ([Spec.Eras]); a cached legacy
//     era skips the probe, a failed Connect forgets it, [Spec.Reprobe]
//     ignores it.
//     [ServerInfo] reports the era and version. mcp-go's own probe is never
//     used: it trusts any discover answer.
//   - In the modern era over streamable HTTP: tools/list leaves out a
//     tool whose x-mcp-header annotations are invalid (logged), and a
//     tools/call given the tool's schema ([CallOptions].InputSchema)
//     mirrors the annotated arguments into Mcp-Param-* headers. An
//     UnsupportedProtocolVersionError (-32022) to the probe that lists
//     2026-07-28 as supported gets the probe once more.
//   - stdio children run in their own process group with
//     Pdeathsig=SIGKILL. Close closes stdin, gives the child mcp-go's grace
//     period, then SIGKILLs the whole group and waits until no member is left
//     running, so wrappers such as sh -c, npx or uv leave no grandchildren.
//     Orphaned group members can only be reaped by their new parent: when the
//     gateway runs as PID 1 or has called [EnableSubreaper], Close reaps them
//     too; otherwise that is the init process's job.
//   - On Linux with a writable cgroup v2 that has cgroup.kill (5.14+), each
//     stdio child is born in a cgroup of its own (clone3 CLONE_INTO_CGROUP),
//     so descendants that call setsid or double-fork stay in it; Close
//     writes cgroup.kill, reaps the orphans re-parented here and removes the
//     cgroup. Without one, Close also kills the descendants found through
//     their parent chains in /proc and, with [EnableSubreaper], the orphans
//     re-parented to this process that are no live stdio child.
//   - [Spec.EmptyEnv] gives a child nothing of the gateway's environment and
//     [Spec.RunAs] another uid and gid (with no supplementary groups);
//     [Spec.Isolate] puts it in PID, mount and IPC namespaces of its own
//     with its own /proc: this binary is re-executed as a shim (argv[0]
//     "mcpbus-isolated-child", caught by this package's init) that mounts
//     /proc, drops to RunAs and execs the server.
//   - A relative stdio Command containing a slash is resolved against the
//     gateway's working directory, not against Spec.Dir.
//   - stderr of stdio children is drained all the time, redacted line by
//     line, logged at Debug with a "server" attribute, and its tail is kept
//     for [Client.Stderr]. A failed Connect does not quote it in its error
//     (plain users see those errors); [StderrTail] gets it for operators.
//   - HTTP headers: Spec.Headers go on every request; the headers passed to
//     [Client.CallTool] go on that request only and replace static ones of the
//     same name, compared case-insensitively. For stdio servers they travel
//     as _meta.headers of tools/call.
//   - Secrets stay out of errors, logs (the transports' included) and the
//     stderr tail (package redact): header values, Spec.Env values and the
//     URL's userinfo and query values become "***", and every URL loses its
//     userinfo and query string.
//   - HTTP redirects are refused ([ErrRedirect], nothing is sent to the
//     target) unless [Spec.FollowRedirects]; then each hop passes the
//     client's own CheckRedirect, and a hop to another origin carries no
//     configured or per-call header.
//   - Errors name the server ("mcp server %q: …") and wrap the cause.
//     [ErrSessionExpired] marks an HTTP/SSE server that forgot the session:
//     close the client, connect again once and retry. [ErrConnectionLost]
//     marks a stdio child that went away, [ErrClosed] a call after Close.
//   - Tool definitions are returned as the server sent them (raw JSON
//     schemas, annotations and _meta), and structured content passes through
//     byte for byte.
//
// Notifications: a call's notifications/progress go to its ProgressFunc
// ([CallOptions].Progress); its notifications/message to its LogFunc ([CallOptions].Log),
// only when they are known to be that call's (notify.go: its own HTTP
// response stream, or the one request in flight on a stdio or SSE
// connection); every list_changed to [Spec.OnListChanged]; notifications/resources/updated to
// [Spec.OnResourceUpdated]. mcp-go runs
// stdio notification handlers on the reader goroutine, so none of these
// may call back into the client synchronously.
package mcpclient
