// Command mcpbus-discovery runs the discovery service alone against an
// external NATS and database (tool pins); see "mcpbus serve discovery" for
// the same from the one binary.
package main

import (
	"context"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/bootstrap"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
	"github.com/mcpbus/mcpbus/pkg/store/backends"
	"github.com/mcpbus/mcpbus/services/discovery"
)

func main() {
	bootstrap.Main("discovery", func(ctx context.Context, rt *bootstrap.Runtime, h *bootstrap.Health) error {
		presenceKV, err := bus.PresenceKV(ctx, rt.JS, rt.Names, int(rt.Settings.NATS.Replicas))
		if err != nil {
			return fmt.Errorf("discovery: %w", err)
		}
		db, err := backends.MigrateAndOpen(ctx, rt.Settings.Database, rt.Log)
		if err != nil {
			return err
		}
		defer db.Close()
		h.SetDatabase(db.Ping)
		svc, err := discovery.New(discovery.ConfigFrom(rt.Settings, rt.NC.MaxPayload()), discovery.Deps{
			Log: rt.Log, NC: rt.NC, Names: rt.Names, JS: rt.JS, KV: rt.KV, PresenceKV: presenceKV, ReplicaID: rt.ReplicaID,
			LocalExtensions: rt.Extensions, Pins: db.Pins(), Metrics: metrics.NewDiscovery(rt.MetricsRegistry())})
		if err != nil {
			return err
		}
		return h.Run(ctx, svc)
	})
}
