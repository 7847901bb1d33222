package memory

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/store"
)

type tokenStore struct {
	now  clock // zero value: the process clock
	mu   sync.Mutex
	rows map[string]store.OAuthToken
}

var _ store.TokenStore = (*tokenStore)(nil)

func cloneToken(t store.OAuthToken) store.OAuthToken {
	t.AccessTokenEnc, t.RefreshTokenEnc = cloneBytes(t.AccessTokenEnc), cloneBytes(t.RefreshTokenEnc)
	t.ExpiresAt, t.LeaseExpiresAt = cloneTime(t.ExpiresAt), cloneTime(t.LeaseExpiresAt)
	return t
}

func (s *tokenStore) GetToken(_ context.Context, p store.GetTokenParams) (*store.OAuthToken, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.rows[p.Key]
	if !ok {
		return nil, fmt.Errorf("store: memory: get token: %w", store.ErrNotFound)
	}
	t = cloneToken(t)
	return &t, nil
}

func (s *tokenStore) PutToken(_ context.Context, p store.PutTokenParams) (*store.OAuthToken, error) {
	t := &p.Token
	if err := t.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	row := cloneToken(*t)
	if old, ok := s.rows[t.ConnectionKey]; ok {
		row.LeaseOwner, row.LeaseExpiresAt = old.LeaseOwner, old.LeaseExpiresAt
	} else {
		row.LeaseOwner, row.LeaseExpiresAt = "", nil
	}
	row.UpdatedAt = s.now.now(p.Now)
	s.rows[t.ConnectionKey] = row
	out := cloneToken(row)
	return &out, nil
}

func (s *tokenStore) ClaimRefreshLease(_ context.Context, p store.RefreshLeaseParams) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	key, owner, ttl := p.Key, p.Owner, p.TTL
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now.now(p.Now)
	row, ok := s.rows[key]
	if !ok {
		row = store.OAuthToken{ConnectionKey: key, UpdatedAt: now}
	}
	free := row.LeaseOwner == "" || row.LeaseExpiresAt == nil || !row.LeaseExpiresAt.After(now)
	if !free && row.LeaseOwner != owner {
		return false, nil
	}
	exp := now.Add(ttl)
	row.LeaseOwner, row.LeaseExpiresAt = owner, &exp
	s.rows[key] = row
	return true, nil
}

func (s *tokenStore) RenewRefreshLease(_ context.Context, p store.RefreshLeaseParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	key, owner, ttl := p.Key, p.Owner, p.TTL
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now.now(p.Now)
	row, ok := s.rows[key]
	if !ok || row.LeaseOwner != owner || row.LeaseExpiresAt == nil || !row.LeaseExpiresAt.After(now) {
		return fmt.Errorf("store: memory: renew refresh lease %s as %s: %w", key, owner, store.ErrLeaseLost)
	}
	exp := now.Add(ttl)
	row.LeaseExpiresAt = &exp
	s.rows[key] = row
	return nil
}

func (s *tokenStore) ReleaseRefreshLease(_ context.Context, p store.RefreshLeaseParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if row, ok := s.rows[p.Key]; ok && row.LeaseOwner == p.Owner {
		row.LeaseOwner, row.LeaseExpiresAt = "", nil
		s.rows[p.Key] = row
	}
	return nil
}

func (s *tokenStore) DeleteToken(_ context.Context, p store.DeleteTokenParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.rows, p.Key)
	return nil
}
