// Command mcpbus-toolcall runs the toolcall service alone against an
// external NATS and database; see "mcpbus serve toolcall" for the same from
// the one binary.
package main

import (
	"context"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/audit/audittable"
	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/store"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/toolcall"
)

func main() {
	bootstrap.Main("toolcall", func(ctx context.Context, rt *bootstrap.Runtime, h *bootstrap.Health) error {
		presenceKV, err := bus.PresenceKV(ctx, rt.JS, rt.Names, int(rt.Settings.NATS.Replicas))
		if err != nil {
			return fmt.Errorf("toolcall: %w", err)
		}
		deps := toolcall.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, KV: rt.KV, PresenceKV: presenceKV,
			LocalExtensions: rt.Extensions, ReplicaID: rt.ReplicaID, Metrics: metrics.NewToolcall(rt.MetricsRegistry())}
		tasksOn := rt.Settings.MCPTasks.Enabled && rt.Settings.Database.Backend != config.BackendMemory
		var db store.Store
		if tasksOn || bootstrap.NeedsAuditStore(rt.Settings) {
			if db, err = backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log); err != nil {
				return err
			}
			defer db.Close()
			h.SetDatabase(db.Ping)
			if tasksOn {
				deps.Tasks = db.Tasks()
			}
		}
		if deps.Audit, err = rt.AuditWriter(ctx, audittable.Of(db)); err != nil {
			return fmt.Errorf("toolcall: %w", err)
		}
		svc, err := toolcall.New(toolcall.ConfigFrom(rt.Settings, rt.NC.MaxPayload()), deps)
		if err != nil {
			return err
		}
		return h.Run(ctx, svc)
	})
}
