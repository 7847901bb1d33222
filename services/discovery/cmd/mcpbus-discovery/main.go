// Command mcpbus-discovery runs the discovery service alone against an external NATS
// and database; see "mcpbus serve discovery" for the same from the one binary.
package main

import (
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/services/discovery"
)

func main() { bootstrap.Main(discovery.Spec) }
