// Command mcpbus-tokens runs the tokens service alone against an external
// NATS and database; see "mcpbus serve tokens" for the same from the one
// binary.
package main

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/tokens"
)

func main() {
	bootstrap.Main("tokens", func(ctx context.Context, rt *bootstrap.Runtime, h *bootstrap.Health) error {
		db, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
		if err != nil {
			return err
		}
		defer db.Close()
		h.SetDatabase(db.Ping)
		deps := tokens.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, KV: rt.KV, LocalExtensions: rt.Extensions,
			Store: db, InstanceID: rt.ReplicaID, Metrics: metrics.NewTokens(rt.MetricsRegistry())}
		if db.Backend() != store.BackendMemory {
			deps.Tokens = db.Tokens()
		}
		deps.Sealer, deps.KeyProblem = tokens.SealerFrom(rt.Env)
		svc, err := tokens.New(tokens.ConfigFrom(rt.Settings), deps)
		if err != nil {
			return err
		}
		return h.Run(ctx, svc)
	})
}
