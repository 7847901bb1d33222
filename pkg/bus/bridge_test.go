package bus_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// CapabilitiesOf keeps elicitation, sampling and roots (compacted) and
// nothing else; a declared value that is not an object, or too large, is
// not declared.
func TestCapabilitiesOf(t *testing.T) {
	t.Parallel()
	big := `{"x":"` + strings.Repeat("a", bus.MaxCapabilityBytes) + `"}`
	c := bus.CapabilitiesOf(json.RawMessage(`{"elicitation": {"form": {} }, "sampling": ` + big + `, "roots": true, "experimental": {"x": {}}, "tasks": {}}`))
	if c == nil || string(c.JSON()) != `{"elicitation":{"form":{}}}` || !c.Has("elicitation") || c.Has("sampling") || c.Has("roots") || c.Has("tasks") {
		t.Fatalf("CapabilitiesOf = %s", c.JSON())
	}
	if c := bus.CapabilitiesOf(json.RawMessage(`[]`)); c != nil {
		t.Errorf("a non-object: %s", c.JSON())
	}
	var none *bus.ClientCapabilities
	if none.Has("elicitation") || string(none.JSON()) != `{}` || none.Validate() != nil {
		t.Error("nil capabilities are not none")
	}
	if err := (&bus.ClientCapabilities{Roots: json.RawMessage(`{"listChanged":`)}).Validate(); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("malformed roots: %v", err)
	}
	if err := (&bus.CallInput{InputResponses: json.RawMessage(`{"a":{"action":"accept"}}`), RequestState: "s"}).Validate(); err != nil {
		t.Errorf("valid input: %v", err)
	}
	if err := (&bus.CallInput{InputResponses: json.RawMessage(`"x"`)}).Validate(); !errors.Is(err, bus.ErrInvalidRequest) {
		t.Errorf("input responses not an object: %v", err)
	}
}
