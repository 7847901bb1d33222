package launchpolicy

// Error is a refusal by the personal launch policy. Field is "command",
// "args", "env", "env.<NAME>" or "type"; Value is the offending command,
// flag or variable name, never a variable's value.
type Error struct {
	Server  string
	Field   string
	Value   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// UserMessage is Message: written for the author of the definition, it
// carries no variable value (bus.UserMessager).
func (e *Error) UserMessage() string { return e.Message }
