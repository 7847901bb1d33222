module github.com/mcpbus/mcpbus/migrations

go 1.26.0
