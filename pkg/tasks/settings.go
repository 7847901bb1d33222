package tasks

import (
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
)

// Settings are the mcp_tasks knobs the logic needs, as durations.
type Settings struct {
	PollInterval              time.Duration
	MaxPollBackoff            time.Duration
	InputRequiredPollInterval time.Duration
	// TrackingDegradedAfterErrors: tracking is degraded once this many
	// consecutive poll errors happened.
	TrackingDegradedAfterErrors int
	MaxResultBytes              int
	ResultPreviewMaxChars       int
}

// SettingsFrom converts config.yaml's mcp_tasks section.
func SettingsFrom(c config.MCPTasks) Settings {
	return Settings{
		PollInterval:                time.Duration(c.PollIntervalSeconds) * time.Second,
		MaxPollBackoff:              time.Duration(c.MaxPollBackoffSeconds) * time.Second,
		InputRequiredPollInterval:   time.Duration(c.InputRequiredPollIntervalSeconds) * time.Second,
		TrackingDegradedAfterErrors: c.TrackingDegradedAfterErrors,
		MaxResultBytes:              c.MaxResultBytes,
		ResultPreviewMaxChars:       c.ResultPreviewMaxChars,
	}
}

// DefaultSettings are config.yaml's defaults.
func DefaultSettings() Settings { return SettingsFrom(config.DefaultSettings().MCPTasks) }
