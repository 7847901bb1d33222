package bus

// PinEvent is the body of a PinEvents message: the server identity whose
// pin an admin decided, and its owner for a personal connection.
type PinEvent struct {
	Server string `json:"server"`
	Owner  string `json:"owner,omitempty"`
}
