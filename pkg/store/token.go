package store

import (
	"fmt"
	"time"
)

// OAuthToken is one row of mcp_oauth_tokens: the latest encrypted tokens of a
// refresh-token chain shared by replicas, and the lease that serialises
// refreshes (reference §5.1).
//
// A row created by ClaimRefreshLease before any PutToken has only the key and
// the lease: its token fields are empty.
type OAuthToken struct {
	ConnectionKey    string // server name, or the runtime name of a personal connection
	OwnerUserID      string // "" for deployment servers
	Fingerprint      string // 64 hex digits: SHA-256 of the chain's identity
	RequestShapeHash string
	AccessTokenEnc   []byte // AES-256-GCM ciphertext
	RefreshTokenEnc  []byte // AES-256-GCM ciphertext
	TokenType        string
	ExpiresAt        *time.Time // of the access token

	// The refresh lease; PutToken never changes it, only the lease methods do.
	LeaseOwner     string
	LeaseExpiresAt *time.Time

	UpdatedAt time.Time // set by the store when the tokens change
}

// Validate checks what every backend requires of PutToken.
func (t *OAuthToken) Validate() error {
	if t.ConnectionKey == "" {
		return fmt.Errorf("%w: oauth token: connection_key must not be empty", ErrInvalid)
	}
	if t.Fingerprint != "" && len(t.Fingerprint) != 64 {
		return fmt.Errorf("%w: oauth token: fingerprint must be 64 characters, got %d", ErrInvalid, len(t.Fingerprint))
	}
	return nil
}
