// Command mcpbus-api runs the api service alone against an external NATS
// and database; see "mcpbus serve api" for the same from the one binary.
package main

import (
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/services/api"
)

func main() { bootstrap.Main(api.Spec) }
