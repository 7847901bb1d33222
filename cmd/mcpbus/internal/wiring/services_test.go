package wiring

import (
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// toolcall opens the database for durable tasks and for audit.database,
// and only then.
func TestToolcallNeedsStore(t *testing.T) {
	t.Parallel()
	svc, ok := ByName("toolcall")
	if !ok {
		t.Fatal("no toolcall service")
	}
	for _, tc := range []struct {
		name  string
		setup func(*config.Settings)
		want  bool
	}{
		{"memory", func(*config.Settings) {}, false},
		{"sqlite without tasks or audit.database", func(s *config.Settings) {
			s.Database.Backend, s.MCPTasks.Enabled = config.BackendSQLite, false
		}, false},
		{"sqlite with tasks", func(s *config.Settings) { s.Database.Backend, s.MCPTasks.Enabled = config.BackendSQLite, true }, true},
		{"audit.database", func(s *config.Settings) {
			s.Database.Backend, s.MCPTasks.Enabled, s.Audit.Database = config.BackendPostgres, false, true
		}, true},
		{"audit.database with audit off", func(s *config.Settings) {
			s.Database.Backend, s.MCPTasks.Enabled, s.Audit.Database, s.Audit.Enabled = config.BackendPostgres, false, true, false
		}, false},
	} {
		s := config.DefaultSettings()
		tc.setup(&s)
		if got := svc.NeedsStore(&s); got != tc.want {
			t.Errorf("%s: NeedsStore = %v, want %v", tc.name, got, tc.want)
		}
	}
}
