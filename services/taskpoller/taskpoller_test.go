package taskpoller_test

import (
	"context"
	"testing"
	"time"

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
	st := testkit.SQLiteStore(t)
	if err := st.Close(); err != nil { // a database that does not answer
		t.Fatal(err)
	}
	svc, err := taskpoller.New(taskpoller.Config{}, taskpoller.Deps{NC: b.Connect(t), Names: b.Names, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	// A Run that starts anyway returns nil at the deadline instead of
	// running until the suite's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := svc.Run(ctx); err == nil {
		t.Fatal("Run started (and ran until the test's deadline) with a database that does not answer")
	}
}
