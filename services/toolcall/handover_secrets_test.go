package toolcall_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// A hand-over forwards the call's bus.Call, but never its request secrets
// or run metadata: the chain used them on the receiving replica, and
// nothing of them crosses the bus to the owner (a subscriber on the
// hand-over subjects sees neither the values nor the fields), while the
// call itself and its arguments do arrive.
func TestHandOverForwardsNoRequestSecrets(t *testing.T) {
	t.Parallel()
	e, _, _ := twoReplicasServing(t, false)
	handOvers := make(chan *nats.Msg, 64)
	sub, err := e.bus.NC.ChanSubscribe(e.bus.Names.Internal("toolcall.stdio.>"), handOvers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.bus.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	const secret, runMeta = "s3cret-never-forwarded-7f1c", "run-meta-never-forwarded-2b9e"
	for i := range 32 {
		r := e.mustCall(t, bus.Call{Tool: "fake_echo", UserID: "u", ThreadID: fmt.Sprint("secret-", i),
			Arguments: json.RawMessage(`{"message":"arrived"}`), Context: &bus.CallContext{Secrets: map[string]string{"unused_key": secret}},
			Metadata: json.RawMessage(`{"note":"` + runMeta + `"}`)})
		if text(t, r) != "arrived" {
			t.Fatalf("echo = %+v", r)
		}
	}
	if len(handOvers) == 0 {
		t.Fatal("32 threads' calls all landed on their sessions' owners: no hand-over to inspect")
	}
	for len(handOvers) > 0 {
		body := string((<-handOvers).Data)
		for _, leak := range []string{secret, runMeta, `"secrets"`, `"metadata"`, "unused_key"} {
			if strings.Contains(body, leak) {
				t.Errorf("a hand-over carries %q: %s", leak, body)
			}
		}
		if !strings.Contains(body, `"call":{"tool":"fake_echo"`) || !strings.Contains(body, `"arrived"`) {
			t.Errorf("a hand-over lacks the call or its arguments: %s", body)
		}
	}
}
