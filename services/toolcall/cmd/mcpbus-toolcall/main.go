// Command mcpbus-toolcall runs the toolcall service alone against an external NATS
// and database; see "mcpbus serve toolcall" for the same from the one binary.
package main

import (
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

func main() { bootstrap.Main(toolcall.Spec) }
