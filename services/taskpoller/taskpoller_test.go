package taskpoller_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/testkit"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func TestStartsRegistersAndAnswersHealth(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	st := testkit.SQLiteStore(t)
	svc, err := taskpoller.New(taskpoller.Config{}, taskpoller.Deps{NC: b.Connect(t), Names: b.Names, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	testkit.ExerciseLifecycle(t, b, bus.ServiceTaskpoller, svc.Run)
}

func TestRefusesAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	svc, err := taskpoller.New(taskpoller.Config{}, taskpoller.Deps{NC: b.Connect(t), Names: b.Names, Store: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Run(context.Background()); err == nil {
		t.Fatal("Run started with a database that does not answer")
	}
}

// downStore is a database that is down: the edge of the world, not a mock of a store.
type downStore struct{}

func (downStore) Ping(context.Context) error { return errors.New("connection refused") }
