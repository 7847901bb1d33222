// Package launchpolicy decides which stdio MCP servers mcpbus may start and
// how.
//
// It judges users' personal connections only; the operator's own
// extensions file is checked by the config package's schema rules, never by
// a launch policy (the operator already decides what the host runs).
//
// [Personal] checks a user's personal stdio connection, which is untrusted:
// it is off unless config.yaml sets personal_connections.stdio (and never in
// key-less mode), and the command line must match one of the operator's
// launch specs exactly, the user adding arguments only in the spec's named
// places and environment variables only from the spec's user_env list. The
// result is the [Launch] to run: the exact argv and an environment built
// from the spec (never the gateway's). The api (on save), discovery and
// toolcall (before every spawn) call the same [Personal.Check], so a
// definition stored before the policy tightened is refused where it would
// run.
package launchpolicy
