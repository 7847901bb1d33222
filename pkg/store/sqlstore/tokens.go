package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// tokenStatements are the mcp_oauth_tokens statements of one dialect.
type tokenStatements struct {
	get, put, claimLease, renewLease, releaseLease, delete string
}

// tokenPutColumns are what PutToken writes (after $1 now).
var tokenPutColumns = pick(tokenColumns, writeInsert)

const (
	// claimLeaseSQL: $1 now, $2 ttl, $3 key, $4 owner. It returns a row only
	// when the lease was taken.
	claimLeaseSQL = `
INSERT INTO mcp_oauth_tokens AS t (connection_key, lease_owner, lease_expires_at, updated_at)
VALUES ($3, $4, {now} + {lease}, {now})
ON CONFLICT (connection_key) DO UPDATE SET
	lease_owner = excluded.lease_owner,
	lease_expires_at = excluded.lease_expires_at
WHERE t.lease_owner IS NULL
	OR t.lease_expires_at IS NULL
	OR t.lease_expires_at <= {now}
	OR t.lease_owner = excluded.lease_owner
RETURNING connection_key`

	// renewLeaseSQL: $1 now, $2 ttl, $3 key, $4 owner.
	renewLeaseSQL = `
UPDATE mcp_oauth_tokens SET lease_expires_at = {now} + {lease}
WHERE connection_key = $3 AND lease_owner = $4 AND lease_expires_at > {now}`
)

func tokenSQL(d Dialect) tokenStatements {
	cols := names(tokenColumns)
	vals := make([]string, len(tokenPutColumns))
	updates := make([]string, len(tokenPutColumns)-1)
	for i, c := range tokenPutColumns {
		vals[i] = fmt.Sprintf("$%d", i+2)
		if i > 0 { // not the key
			updates[i-1] = c.name + " = excluded." + c.name
		}
	}
	return tokenStatements{
		get: "SELECT " + cols + " FROM mcp_oauth_tokens WHERE connection_key = $1",
		put: d.render("INSERT INTO mcp_oauth_tokens (" + names(tokenPutColumns) + ", updated_at)\n" +
			"VALUES (" + strings.Join(vals, ", ") + ", {now})\n" +
			"ON CONFLICT (connection_key) DO UPDATE SET\n\t" + strings.Join(updates, ",\n\t") +
			",\n\tupdated_at = excluded.updated_at\nRETURNING " + cols),
		claimLease:   d.render(claimLeaseSQL),
		renewLease:   d.render(renewLeaseSQL),
		releaseLease: "UPDATE mcp_oauth_tokens SET lease_owner = NULL, lease_expires_at = NULL WHERE connection_key = $1 AND lease_owner = $2",
		delete:       "DELETE FROM mcp_oauth_tokens WHERE connection_key = $1",
	}
}

// GetToken implements store.TokenStore.
func (s *Store) GetToken(ctx context.Context, p store.GetTokenParams) (*store.OAuthToken, error) {
	t, err := queryRow(ctx, s.db, tokenColumns, s.q.tokens.get, p.Key)
	if err != nil {
		return nil, s.translate("get token", err)
	}
	return t, nil
}

// PutToken implements store.TokenStore.
func (s *Store) PutToken(ctx context.Context, p store.PutTokenParams) (*store.OAuthToken, error) {
	if err := p.Token.Validate(); err != nil {
		return nil, err
	}
	args := append([]any{s.d.now(p.Now)}, values(s.d, tokenPutColumns, &p.Token)...)
	t, err := queryRow(ctx, s.db, tokenColumns, s.q.tokens.put, args...)
	if err != nil {
		return nil, s.translate("put token", err)
	}
	return t, nil
}

// ClaimRefreshLease implements store.TokenStore.
func (s *Store) ClaimRefreshLease(ctx context.Context, p store.RefreshLeaseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	// RETURNING connection_key, scanned into a one-column table.
	keys := tokenColumns[:1]
	rows, err := queryRows(ctx, s.db, keys, s.q.tokens.claimLease, s.d.now(p.Now), s.d.duration(p.TTL), p.Key, p.Owner)
	if err != nil {
		return false, s.translate("claim refresh lease", err)
	}
	return len(rows) == 1, nil
}

// RenewRefreshLease implements store.TokenStore.
func (s *Store) RenewRefreshLease(ctx context.Context, p store.RefreshLeaseParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	n, err := exec(ctx, s.db, s.q.tokens.renewLease, s.d.now(p.Now), s.d.duration(p.TTL), p.Key, p.Owner)
	if err != nil {
		return s.translate("renew refresh lease", err)
	}
	if n == 0 {
		return fmt.Errorf("store: %s: renew refresh lease %s as %s: %w", s.d.Backend, p.Key, p.Owner, store.ErrLeaseLost)
	}
	return nil
}

// ReleaseRefreshLease implements store.TokenStore.
func (s *Store) ReleaseRefreshLease(ctx context.Context, p store.RefreshLeaseParams) error {
	if _, err := exec(ctx, s.db, s.q.tokens.releaseLease, p.Key, p.Owner); err != nil {
		return s.translate("release refresh lease", err)
	}
	return nil
}

// DeleteToken implements store.TokenStore.
func (s *Store) DeleteToken(ctx context.Context, p store.DeleteTokenParams) error {
	if _, err := exec(ctx, s.db, s.q.tokens.delete, p.Key); err != nil {
		return s.translate("delete token", err)
	}
	return nil
}
