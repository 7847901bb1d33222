// Package crypto seals the secrets mcpbus keeps in its database (the OAuth
// access and refresh tokens of mcp_oauth_tokens) with AES-256-GCM under the
// credentials key.
//
// # The key
//
// The key is 32 random bytes, given in $MCPBUS_CREDENTIALS_KEY (or its alias
// $DEER_FLOW_CREDENTIALS_KEY) as either
//
//   - 64 hexadecimal digits, or
//   - base64 of the 32 bytes: standard or URL alphabet, padded or not (so a
//     Fernet-style url-safe key works too).
//
// `mcpbus keygen` prints a new key in standard padded base64 (NewKey). Every
// instance that shares a database must have the same key; an instance with a
// different key cannot open what the others sealed (ErrOpen).
//
// # The ciphertext
//
// Seal returns version byte 0x01, a random 12-byte nonce, then the GCM
// ciphertext and tag. Callers pass additional data (for example the row key
// and column name) so a ciphertext copied to another row or column does not
// open. A Sealer is safe for concurrent use.
package crypto
