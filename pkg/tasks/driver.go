package tasks

import (
	"encoding/json"
	"fmt"
)

// DriverStructured is the driver name of task toolsets speaking the
// structuredContent protocol (the only driver).
const DriverStructured = "structured"

// Driver data roles: the keys of the three raw tool names in driver_data.
const (
	RoleSubmit = "submit_tool"
	RoleStatus = "status_tool"
	RoleCancel = "cancel_tool"
)

// DriverData is the driver_data column: the toolset's three raw tool names
// (before any server prefix).
type DriverData struct {
	Toolset    string `json:"toolset,omitempty"`
	SubmitTool string `json:"submit_tool"`
	StatusTool string `json:"status_tool"`
	CancelTool string `json:"cancel_tool"`
	// Traceparent is the W3C trace context of the submit (empty while
	// tracing is off), so each poll's span links to the submit's trace.
	Traceparent string `json:"traceparent,omitempty"`
}

// TraceparentOf returns the submit's traceparent from a row's
// driver_data, "" when there is none.
func TraceparentOf(driverData json.RawMessage) string {
	var d struct {
		Traceparent string `json:"traceparent"`
	}
	_ = json.Unmarshal(driverData, &d)
	return d.Traceparent
}

// Marshal encodes the driver data for the row.
func (d DriverData) Marshal() json.RawMessage {
	b, _ := json.Marshal(d) // strings only: cannot fail
	return b
}

// ToolFor returns the raw tool name of role from the row's driver_data, or
// the protocol error "Task driver_data is missing required '<role>'".
func ToolFor(driverData json.RawMessage, role string) (string, error) {
	var m map[string]any
	_ = json.Unmarshal(driverData, &m)
	if s, ok := m[role].(string); ok && s != "" {
		return s, nil
	}
	return "", protocolErrorf("Task driver_data is missing required '%s'", role)
}

// UnknownDriverError is the transient error of a row whose driver is not
// registered.
func UnknownDriverError(name string) error {
	return fmt.Errorf("No MCP task driver registered as '%s'", name) //nolint:staticcheck // the reference's text
}
