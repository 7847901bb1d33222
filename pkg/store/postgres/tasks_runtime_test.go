package postgres_test

import (
	"testing"

	"github.com/mcpbus/mcpbus/pkg/store/storetest"
)

func TestTaskRuntime(t *testing.T) {
	t.Parallel()
	storetest.ExerciseTaskRuntime(t, newStore)
}
