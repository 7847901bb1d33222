// Command mcpbus-api runs the api service alone against an external NATS
// and database; see "mcpbus serve api" for the same from the one binary.
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/audit/audittable"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/crypto"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/api"
)

func main() {
	bootstrap.Main("api", func(ctx context.Context, rt *bootstrap.Runtime, h *bootstrap.Health) error {
		sealer, err := crypto.FromEnv(rt.Env)
		if err != nil && !errors.Is(err, crypto.ErrNoKey) {
			return fmt.Errorf("api: %w", err)
		}
		db, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
		if err != nil {
			return err
		}
		defer db.Close()
		h.SetDatabase(db.Ping)
		aw, err := rt.AuditWriter(ctx, audittable.Of(db))
		if err != nil {
			return fmt.Errorf("api: %w", err)
		}
		svc, err := api.New(api.ConfigFrom(rt.Settings, rt.ExtensionsPath),
			api.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, KV: rt.KV, Store: db, Sealer: sealer, Metrics: rt.MetricsRegistry(), Audit: aw})
		if err != nil {
			return err
		}
		return h.Run(ctx, svc)
	})
}
