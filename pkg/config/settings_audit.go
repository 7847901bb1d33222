package config

// AuditSettings is config.yaml's audit block: the audit log of tool calls
// and config changes, kept in a JetStream stream (MCPBUS_AUDIT, namespaced).
type AuditSettings struct {
	// Enabled writes a record per tool call (toolcall) and per config
	// change through the API (api). Default true.
	Enabled bool `yaml:"enabled"`
	// MaxAgeHours drops records older than this. Default 168 (7 days).
	MaxAgeHours int `yaml:"max_age_hours"`
	// MaxRecords bounds the stream's record count; the oldest go first.
	// Default 1000000.
	MaxRecords int64 `yaml:"max_records"`
	// MaxBytes bounds the stream's size (at least 1 MiB); the oldest
	// records go first. JetStream reserves this much storage for the
	// stream up front. Default 0: no size bound beyond the age and count.
	MaxBytes int64 `yaml:"max_bytes"`
	// CaptureArguments records each call's arguments, masked (values of
	// secret-looking keys and the call's own secret and header values
	// become ***) and cut to MaxArgumentBytes. Default false: never.
	CaptureArguments bool `yaml:"capture_arguments"`
	// MaxArgumentBytes caps captured arguments. Default 1024 (64..65536).
	MaxArgumentBytes int `yaml:"max_argument_bytes"`
	// Database also writes every record to the database table mcp_audit
	// (in the background, like the stream), for SQL queries and a
	// retention of its own: rows older than MaxAgeHours are deleted
	// periodically. Needs database.backend sqlite or postgres. Reads
	// (`mcpbus audit tail`, GET /api/mcp/audit) stay on the stream.
	// Default false.
	Database bool `yaml:"database"`
}

// DefaultAudit is the audit block's defaults.
func DefaultAudit() AuditSettings {
	return AuditSettings{Enabled: true, MaxAgeHours: 168, MaxRecords: 1_000_000, MaxArgumentBytes: 1024}
}

func (v *settingsValidator) audit(a *AuditSettings) {
	if a.MaxAgeHours < 1 || a.MaxAgeHours > 24*366 {
		v.errorf("audit.max_age_hours", "must be between 1 and %d, got %d", 24*366, a.MaxAgeHours)
	}
	if a.MaxBytes != 0 && a.MaxBytes < 1<<20 {
		v.errorf("audit.max_bytes", "must be 0 (no bound) or at least 1048576 (1 MiB), got %d", a.MaxBytes)
	}
	if a.MaxRecords < 1 {
		v.errorf("audit.max_records", "must be at least 1, got %d", a.MaxRecords)
	}
	if a.MaxArgumentBytes < 64 || a.MaxArgumentBytes > 65536 {
		v.errorf("audit.max_argument_bytes", "must be between 64 and 65536, got %d", a.MaxArgumentBytes)
	}
}
