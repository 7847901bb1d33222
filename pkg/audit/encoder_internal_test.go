package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A record encoded in a pooled buffer is byte for byte json.Marshal's
// encoding (HTML escaped, no trailing newline), also when the buffer was
// used before for a longer record.
func TestEncoderMatchesMarshal(t *testing.T) {
	t.Parallel()
	long := Record{Kind: KindCall, User: "alice", Tool: "search", Arguments: json.RawMessage(`{"q":"` + string(bytes.Repeat([]byte("x"), 4096)) + `"}`)}
	short := Record{Kind: KindCall, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), User: "bob<script>", Tool: "a&b",
		Arguments: json.RawMessage(`{ "html": "<b>" }`), DurationMS: 1.5, Outcome: "ok"}
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	for _, r := range []Record{long, short} {
		got, err := e.encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("pooled encoding\n%s\nwant json.Marshal's\n%s", got, want)
		}
	}
}

// A reused encoder's message carries only the new record: its subject,
// body and id, no header or reply the client set on the previous one.
func TestEncoderMessageReset(t *testing.T) {
	t.Parallel()
	e := &encoder{}
	m := e.message("a", []byte("1"), "id-1")
	m.Reply = "_INBOX.x"       // as the JetStream client sets it
	m.Header.Set("Extra", "x") // as a publish option would
	m = e.message("b", []byte("2"), "id-2")
	if m.Subject != "b" || string(m.Data) != "2" || m.Reply != "" {
		t.Fatalf("reused message = %q %q reply %q", m.Subject, m.Data, m.Reply)
	}
	if len(m.Header) != 1 || m.Header.Get(jetstream.MsgIDHeader) != "id-2" {
		t.Fatalf("reused header = %v, want only the new id", m.Header)
	}
}
