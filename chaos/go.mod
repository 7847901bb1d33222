module github.com/mcpbus/mcpbus/chaos

go 1.26.0

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/mcpbus/mcpbus/pkg v0.0.0
	github.com/nats-io/nats.go v1.55.0
)
