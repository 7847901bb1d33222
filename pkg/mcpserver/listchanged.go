package mcpserver

import (
	"encoding/json"
	"slices"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Catalog events (mcpbus.events.catalog, bus.CatalogEvent) become
// list_changed notifications on the transports' open streams: an event
// naming a user (a personal connection's own list_changed) is that user's
// alone; an event naming lists changes those, one without lists any of
// them. Only lists this server declares listChanged for are notified
// (capabilities).

// listMethods are the list_changed notifications by list.
var listMethods = map[string]string{
	bus.ListTools:     "notifications/tools/list_changed",
	bus.ListPrompts:   "notifications/prompts/list_changed",
	bus.ListResources: "notifications/resources/list_changed",
}

// ChangedLists returns the lists a catalog event body changed for user
// ("" for any user) that this server announces, in the order tools,
// prompts, resources; none when the event is another user's. An
// unreadable body changes every list (as a change of anything would).
func ChangedLists(data []byte, user string) []string {
	var ev bus.CatalogEvent
	if json.Unmarshal(data, &ev) == nil && ev.UserID != "" && user != "" && ev.UserID != user {
		return nil
	}
	caps := capabilities()
	var out []string
	for _, l := range []string{bus.ListTools, bus.ListPrompts, bus.ListResources} {
		c, _ := caps[l].(map[string]any)
		if on, _ := c["listChanged"].(bool); !on {
			continue
		}
		if len(ev.Lists) == 0 || slices.Contains(ev.Lists, l) {
			out = append(out, l)
		}
	}
	return out
}

// AnnouncedLists are the lists this server declares listChanged for, in
// the order tools, prompts, resources: what a change of everything (a
// user's personal connections) notifies.
func AnnouncedLists() []string { return ChangedLists([]byte(`{}`), "") }

// EventUser is the user a catalog event body is for ("" for everyone).
func EventUser(data []byte) string {
	var ev struct {
		UserID string `json:"user_id"`
	}
	_ = json.Unmarshal(data, &ev)
	return ev.UserID
}

// ListChangedNotification is list's notifications/<list>/list_changed
// (legacy era: no params).
func ListChangedNotification(list string) *Message {
	return Notification(listMethods[list], nil)
}
