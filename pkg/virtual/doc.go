// Package virtual compiles config.yaml's virtual_servers into sets and
// decides, for every list and every call, what a caller bound to one may
// see and do.
//
// A Set is a named subset of the catalog: the tools of its servers whose
// catalog (visible) names match its tool globs, each shown under its
// override (name, description, annotations, routing hint), with the set's
// own tool_search setting. The same Set answers on every transport:
// discovery filters mcpbus.tools.list and .search with View, toolcall maps
// a call's name back with CatalogName and refuses anything else with
// forbidden, and the federation of resources and prompts filters with
// Allows (server, name), so nothing the set does not hold can be listed or
// called under any name form.
//
// A Policy says which sets a caller may use: an API key's
// api.keys[].virtual_servers, a NATS identity's nats.identities entry.
// Decisions are errors with code forbidden whose details name the policy.
package virtual
