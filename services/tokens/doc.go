// Package tokens is the mcpbus tokens service: the only part of mcpbus that
// talks to OAuth token endpoints. It serves access tokens over the bus to
// discovery and toolcall and keeps the encrypted refresh-token chain that
// replicas share. This first version starts, connects, registers with NATS
// micro and answers health; the grants come with the token-custody work.
package tokens
