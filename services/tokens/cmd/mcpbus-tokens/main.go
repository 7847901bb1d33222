// Command mcpbus-tokens runs the tokens service alone against an external NATS
// and database; see "mcpbus serve tokens" for the same from the one binary.
package main

import (
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/services/tokens"
)

func main() { bootstrap.Main(tokens.Spec) }
