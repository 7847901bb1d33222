package tokens

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// chainFingerprint is the SHA-256 (hex) of what a refresh-token chain
// continues: token_url, client_id, grant_type, scope, audience and the
// configured seed refresh token. client_secret is not part of it, so
// rotating the secret keeps the chain.
func chainFingerprint(o *config.OAuth) string {
	return hashJSON([]string{o.TokenURL, o.ClientID, o.GrantType, o.Scope, o.Audience, o.RefreshToken})
}

// requestShape is the SHA-256 (hex) of how an access token is requested and
// read: extra_token_params and the response-field settings. A stored access
// token is reused only by callers with the same shape.
func requestShape(o *config.OAuth) string {
	extras := make([][2]string, 0, len(o.ExtraTokenParams))
	for _, k := range slices.Sorted(maps.Keys(o.ExtraTokenParams)) {
		extras = append(extras, [2]string{k, o.ExtraTokenParams[k]})
	}
	return hashJSON(map[string]any{
		"extra_token_params": extras,
		"token_field":        o.TokenField,
		"token_type_field":   o.TokenTypeField,
		"expires_in_field":   o.ExpiresInField,
		"default_token_type": o.DefaultTokenType,
	})
}

func hashJSON(v any) string {
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// memKey names a connection in this process: the server (row key) and,
// for a personal connection, its owner.
func memKey(server, owner string) string { return owner + "\x00" + server }

// additional data binding a ciphertext to its row and column.
func adAccess(key string) []byte  { return []byte("mcp_oauth_tokens/" + key + "/access_token") }
func adRefresh(key string) []byte { return []byte("mcp_oauth_tokens/" + key + "/refresh_token") }
