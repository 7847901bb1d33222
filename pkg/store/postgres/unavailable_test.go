package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/store"
)

// TestClosedPoolIsUnavailable closes the pool before the calls: every
// store's error matches store.ErrUnavailable (what the services answer as
// "unavailable"), and none is mistaken for a missing row.
func TestClosedPoolIsUnavailable(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Tasks().GetTask(ctx, store.GetTaskParams{ID: "mcp-task-1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTask before Close: %v, want not found", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	calls := map[string]func() error{
		"GetTask":   func() error { _, err := s.Tasks().GetTask(ctx, store.GetTaskParams{ID: "mcp-task-1"}); return err },
		"ListTasks": func() error { _, err := s.Tasks().ListTasks(ctx, store.ListTasksParams{UserID: "u"}); return err },
		"GetToken":  func() error { _, err := s.Tokens().GetToken(ctx, store.GetTokenParams{Key: "k"}); return err },
		"ListConnections": func() error {
			_, err := s.Connections().ListConnections(ctx, store.ListConnectionsParams{UserID: "u"})
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after Close: %v, want store.ErrUnavailable", name, err)
		}
	}
}
