package sqlite

import (
	"database/sql"
	"encoding/json"
	"time"
)

// nullText maps "" to NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBlob maps an empty slice to NULL.
func nullBlob(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// millis maps a time to Unix milliseconds and nil to NULL.
func millis(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMillis(v.Int64)
	return &t
}

func rawJSON(v sql.NullString) json.RawMessage {
	if !v.Valid {
		return nil
	}
	return json.RawMessage(v.String)
}
