package bus_test

import (
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// The empty namespace keeps today's names exactly; a namespace prefixes
// every subject with "<ns>." and every bucket, stream and micro service
// name with "<ns>_".
func TestNames(t *testing.T) {
	t.Parallel()
	stg, err := bus.NewNames("stg")
	if err != nil {
		t.Fatal(err)
	}
	var def bus.Names
	for _, c := range []struct{ got, want string }{
		{def.ToolsList(), "mcpbus.tools.list"},
		{def.ToolsSearch(), "mcpbus.tools.search"},
		{def.ToolsCall(), "mcpbus.tools.call"},
		{def.CacheReset(), "mcpbus.cache.reset"},
		{def.TasksList(), "mcpbus.tasks.list"},
		{def.TasksGet(), "mcpbus.tasks.get"},
		{def.TasksCancel(), "mcpbus.tasks.cancel"},
		{def.InternalCall(), "mcpbus.internal.call"},
		{def.InternalToken(), "mcpbus.internal.token"},
		{def.InternalCatalog(), "mcpbus.internal.catalog"},
		{def.InternalServers(), "mcpbus.internal.servers"},
		{def.InternalPersonal(), "mcpbus.internal.personal"},
		{def.Health(bus.ServiceAPI), "mcpbus.internal.health.mcpbus-api"},
		{def.EventsAll(), "mcpbus.events.>"},
		{def.EventsCatalog(), "mcpbus.events.catalog"},
		{def.TaskEvents("th"), "mcpbus.events.tasks.th"},
		{def.PersonalEventsAll(), "mcpbus.events.personal.>"},
		{def.ConfigBucket(), "MCPBUS"},
		{def.PresenceBucket(), "MCPBUS_PRESENCE"},
		{def.EventsStream(), "MCPBUS_EVENTS"},
		{def.Service(bus.ServiceDiscovery), "mcpbus-discovery"},
		{stg.ToolsCall(), "stg.mcpbus.tools.call"},
		{stg.Internal("toolcall.sessions.close"), "stg.mcpbus.internal.toolcall.sessions.close"},
		{stg.EventsAll(), "stg.mcpbus.events.>"},
		{stg.PersonalEvents("a.b"), "stg.mcpbus.events.personal.a_b"},
		{stg.ConfigBucket(), "stg_MCPBUS"},
		{stg.PresenceBucket(), "stg_MCPBUS_PRESENCE"},
		{stg.EventsStream(), "stg_MCPBUS_EVENTS"},
		{stg.Service(bus.ServiceDiscovery), "stg_mcpbus-discovery"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if d, _ := bus.NewNames(""); d != def {
		t.Error(`NewNames("") is not the default names`)
	}
	for _, bad := range []string{"a.b", "a*", ">", "a b", "ä", "x/y"} {
		if _, err := bus.NewNames(bad); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
}
