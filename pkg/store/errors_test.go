package store_test

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/store"
)

func TestMarkUnavailable(t *testing.T) {
	t.Parallel()
	// A real refused connection: a port nothing listens on any more.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, refused := net.Dial("tcp", addr)
	if refused == nil {
		t.Fatalf("dial %s succeeded", addr)
	}
	bug := errors.New("syntax error at or near SELEC")
	for _, c := range []struct {
		name string
		err  error
		down bool
		want bool
	}{
		{"refused connection", fmt.Errorf("connect: %w", refused), false, true},
		{"the backend says down", bug, true, true},
		{"a query bug", bug, false, false},
		{"not found stays not found", store.ErrNotFound, false, false},
	} {
		got := store.MarkUnavailable(c.err, c.down)
		if errors.Is(got, store.ErrUnavailable) != c.want {
			t.Errorf("%s: MarkUnavailable(%v) matches ErrUnavailable = %v, want %v", c.name, c.err, !c.want, c.want)
		}
		if !errors.Is(got, c.err) || got.Error() != c.err.Error() {
			t.Errorf("%s: the cause is lost: %v", c.name, got)
		}
	}
	if store.MarkUnavailable(nil, true) != nil {
		t.Error("MarkUnavailable(nil) is not nil")
	}
}
