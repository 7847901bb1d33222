package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/store"
)

type connectionKey struct{ userID, name string }

type connectionStore struct {
	now  clock // zero value: the process clock
	mu   sync.Mutex
	rows map[connectionKey]store.PersonalConnection
}

var _ store.ConnectionStore = (*connectionStore)(nil)

func cloneConnection(c store.PersonalConnection) store.PersonalConnection {
	c.Definition = cloneJSON(c.Definition)
	return c
}

func (s *connectionStore) ListConnections(_ context.Context, p store.ListConnectionsParams) ([]store.PersonalConnection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []store.PersonalConnection{}
	for k, c := range s.rows {
		if k.userID == p.UserID {
			out = append(out, cloneConnection(c))
		}
	}
	slices.SortFunc(out, func(a, b store.PersonalConnection) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *connectionStore) GetConnection(_ context.Context, p store.ConnectionParams) (*store.PersonalConnection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.rows[connectionKey{p.UserID, p.Name}]
	if !ok {
		return nil, fmt.Errorf("store: memory: get connection: %w", store.ErrNotFound)
	}
	c = cloneConnection(c)
	return &c, nil
}

func (s *connectionStore) PutConnection(_ context.Context, p store.PutConnectionParams) (*store.PersonalConnection, error) {
	c := &p.Connection
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := connectionKey{c.UserID, c.Name}
	row := cloneConnection(*c)
	now := s.now.now(p.Now)
	row.CreatedAt, row.UpdatedAt = now, now
	if old, ok := s.rows[k]; ok {
		row.CreatedAt = old.CreatedAt
	}
	s.rows[k] = row
	out := cloneConnection(row)
	return &out, nil
}

func (s *connectionStore) DeleteConnection(_ context.Context, p store.ConnectionParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := connectionKey{p.UserID, p.Name}
	if _, ok := s.rows[k]; !ok {
		return fmt.Errorf("store: memory: delete connection %s/%s: %w", p.UserID, p.Name, store.ErrNotFound)
	}
	delete(s.rows, k)
	return nil
}
