package taskpoller_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

const taskServer = `{"mcpServers": {"reports": {"type": "http", "url": "http://127.0.0.1:1/mcp",
	"task_toolsets": [{"name": "reports", "submit_tool": "submit_report", "status_tool": "get_report_status", "cancel_tool": "cancel_report"}]}}}`

func TestStartupRefusesTaskToolsetsWithoutTheRuntime(t *testing.T) {
	t.Parallel()
	ext, err := config.ParseExtensions(filepath.Join(t.TempDir(), "extensions_config.json"), []byte(taskServer))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		enabled bool
		backend string
		want    string
	}{
		{"tasks disabled", false, config.BackendSQLite, "task toolsets need mcp_tasks.enabled: true"},
		{"memory backend", true, config.BackendMemory, "task toolsets need database.backend sqlite or postgres"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := config.DefaultSettings()
			s.MCPTasks.Enabled = tc.enabled
			s.Database.Backend = tc.backend
			err := taskpoller.StartupCheck(ext, &s)
			if err == nil || !strings.Contains(err.Error(), "refusing to start") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("StartupCheck = %v, want a refusal naming %q", err, tc.want)
			}
		})
	}
	// Enabled without task toolsets but on the memory backend: no durable store.
	s := config.DefaultSettings()
	s.MCPTasks.Enabled = true
	empty, _ := config.ParseExtensions("", []byte(`{"mcpServers": {}}`))
	s.Database.Backend = config.BackendMemory
	err = taskpoller.StartupCheck(empty, &s)
	if err == nil || !strings.Contains(err.Error(), "sqlite or postgres") {
		t.Fatalf("enabled on memory: %v", err)
	}
}
