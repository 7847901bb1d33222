// Command mcpbus-taskpoller runs the taskpoller service alone against an external NATS
// and database; see "mcpbus serve taskpoller" for the same from the one binary.
package main

import (
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func main() { bootstrap.Main(taskpoller.Spec) }
