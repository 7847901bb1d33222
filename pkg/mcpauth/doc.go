// Package mcpauth is the client side of MCP authorization toward upstream
// servers: what a gateway needs to connect a person's account on a remote
// MCP server that answers 401 with WWW-Authenticate.
//
//   - Discovery: [ParseChallenge] reads a Bearer challenge (RFC 6750 /
//     RFC 9728 resource_metadata, scope, error); [Discoverer.Challenge]
//     provokes it with an unauthenticated initialize; [Discoverer.Resource]
//     fetches the protected-resource metadata (the header's URL, then the
//     path-aware and root well-known URLs, in the MCP specification's order)
//     and checks that it describes the server; [Discoverer.AuthServer]
//     fetches authorization-server metadata (RFC 8414 path insertion, OpenID
//     path insertion, OpenID path appending) and checks its issuer.
//   - Scope: [SelectScope] takes the challenge's scope, else the resource's
//     scopes_supported, else none.
//   - Client identity: [Register] is RFC 7591 dynamic registration;
//     pre-registered clients and client ID metadata documents are a
//     [Client] the caller builds.
//   - The grant: [NewVerifier] and [Challenge256] (PKCE S256),
//     [AuthorizeURL] (with resource, RFC 8707), [CheckIssuer] (RFC 9207),
//     [Exchange] and [Refresh] (with resource), [Revoke] (RFC 7009).
//
// Every request goes through the *http.Client the caller gives (egress
// policy, timeouts, no redirects). Errors never quote a response body, a
// token, a code, a verifier or a client secret; a token endpoint's refusal
// is an *oauth2.RetrieveError whose Body callers must not show.
package mcpauth
