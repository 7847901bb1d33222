package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
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
