package config

// AuditSettings is config.yaml's audit block: the audit log of tool calls
// and config changes, kept in a JetStream stream (MCPBUS_AUDIT, namespaced).
type AuditSettings struct {
	// Enabled writes a record per tool call (toolcall) and per config
	// change through the API (api). Default true.
	Enabled bool `yaml:"enabled"`
	// MaxAgeHours drops records older than this. Default 168 (7 days).
	MaxAgeHours int `yaml:"max_age_hours"`
	// MaxBytes bounds the stream; the oldest records go first. Default
	// 1 GiB.
	MaxBytes int64 `yaml:"max_bytes"`
	// CaptureArguments records each call's arguments, masked (values of
	// secret-looking keys and the call's own secret and header values
	// become ***) and cut to MaxArgumentBytes. Default false: never.
	CaptureArguments bool `yaml:"capture_arguments"`
	// MaxArgumentBytes caps captured arguments. Default 1024 (64..65536).
	MaxArgumentBytes int `yaml:"max_argument_bytes"`
	// Database also writes records to the database: not implemented yet;
	// true is refused at start.
	Database bool `yaml:"database"`
}

// DefaultAudit is the audit block's defaults.
func DefaultAudit() AuditSettings {
	return AuditSettings{Enabled: true, MaxAgeHours: 168, MaxBytes: 1 << 30, MaxArgumentBytes: 1024}
}

func (v *settingsValidator) audit(a *AuditSettings) {
	if a.MaxAgeHours < 1 || a.MaxAgeHours > 24*366 {
		v.errorf("audit.max_age_hours", "must be between 1 and %d, got %d", 24*366, a.MaxAgeHours)
	}
	if a.MaxBytes < 1<<20 {
		v.errorf("audit.max_bytes", "must be at least 1048576 (1 MiB), got %d", a.MaxBytes)
	}
	if a.MaxArgumentBytes < 64 || a.MaxArgumentBytes > 65536 {
		v.errorf("audit.max_argument_bytes", "must be between 64 and 65536, got %d", a.MaxArgumentBytes)
	}
	if a.Database {
		v.errorf("audit.database", "writing audit records to the database is not implemented; the JetStream stream is the audit log")
	}
}
