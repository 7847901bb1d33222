// Command mcpbus-taskpoller runs the taskpoller service alone against an
// external NATS and database; see "mcpbus serve taskpoller" for the same
// from the one binary.
package main

import (
	"context"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/taskpoller"
)

func main() {
	bootstrap.Main("taskpoller", func(ctx context.Context, rt *bootstrap.Runtime, h *bootstrap.Health) error {
		if err := taskpoller.StartupCheck(rt.Extensions, rt.Settings); err != nil {
			return err
		}
		db, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
		if err != nil {
			return err
		}
		defer db.Close()
		h.SetDatabase(db.Ping)
		cfg := taskpoller.ConfigFrom(rt.Settings, rt.Extensions)
		cfg.LeaseOwner = rt.ReplicaID
		deps := taskpoller.Deps{Log: rt.Log, NC: rt.NC, Names: rt.Names, Store: db, Metrics: metrics.NewTaskpoller(rt.MetricsRegistry())}
		if cfg.Enabled {
			deps.Tasks, deps.Events = db.Tasks(), rt.JS
		}
		svc, err := taskpoller.New(cfg, deps)
		if err != nil {
			return err
		}
		return h.Run(ctx, svc)
	})
}
