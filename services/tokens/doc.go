// Package tokens is the mcpbus tokens service: the only part of mcpbus that
// talks to OAuth token endpoints. It serves access tokens over the bus to
// discovery and toolcall (through pkg/tokenclient) and keeps the encrypted
// refresh-token chain that replicas share.
//
// # Contract
//
// Subject bus.Names.InternalToken ("mcpbus.internal.token"), request
// bus.TokenRequest{server, owner?, config_fingerprint?, force_refresh?,
// rejected_value_sha256?}, reply bus.TokenReply{header: "Authorization",
// value: "<token_type> <access_token>", expires_at, refresh_skew_seconds}.
// owner is "" for a deployment server; for a personal connection it is the
// user id and server is the connection's runtime name: the service asks the
// api for the owner's connections (bus.Names.InternalPersonal) and keys the
// row by the runtime name with owner_user_id set.
// Errors: invalid_request (no server, no oauth block), not_found (unknown
// or disabled server, or not one of the owner's connections),
// config_error (the caller's config_fingerprint differs from this service's
// view after Config.ConfigWait, or the oauth block lacks what its grant
// needs), oauth_failed (the token endpoint refused; invalid_grant names the
// server and asks for a new refresh_token), unavailable (the database cannot
// be read or written, so no refresh token is spent), upstream_timeout.
//
// # Grants
//
// client_credentials and refresh_token, as the original builds them
// (reference §5): the form starts from extra_token_params, then the
// authoritative grant_type, scope and audience, then the credentials in the
// form body (oauth2.AuthStyleInParams, never auto-detected). The response is
// read with token_field, token_type_field (default_token_type when
// missing) and expires_in_field (3600 when missing or unparsable, at least
// 1). A token is refreshed when expires_at - refresh_skew_seconds <= now.
//
// # The chain
//
// With a TokenStore (sqlite or postgres) and a Sealer (the credentials key),
// each refresh_token connection has one mcp_oauth_tokens row keyed by the
// server name (a personal connection's runtime name, with its owner): access and refresh token sealed with AES-256-GCM (bound to row and
// column), token type, expiry, the chain fingerprint (SHA-256 of token_url,
// client_id, grant_type, scope, audience and the configured seed) and the
// request-shape hash (extra_token_params and the response-field settings).
// A refresh: re-read the row and reuse a peer's still-valid access token of
// the same shape; else claim the lease (Config.LeaseTTL, compare-and-set on
// the row), re-read, spend the stored refresh token (the configured seed when
// the fingerprint differs, the row is absent or does not decrypt), renew the
// lease while the request runs, abandon it after Config.AbandonAfter, store
// the result and release the lease. Peers that cannot claim poll the row
// until the holder's result is there or the lease expires. Within one
// replica, concurrent callers for one connection share one acquisition.
//
// If the result cannot be stored it is served from memory, stored again every
// Config.StoreRetryInterval, and the next refresh first stores it (or is
// refused); the lease is kept until it is stored. client_credentials tokens,
// and every token without a store or a key, stay in this process's memory.
// A config that no longer has a deployment server deletes its row.
//
// Nothing logged, stored in clear or returned in an error contains a client
// secret or a token: endpoint response bodies are never used in messages,
// and error texts are masked.
package tokens
