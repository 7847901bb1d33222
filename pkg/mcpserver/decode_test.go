package mcpserver

import (
	"testing"
)

// TestRequestIsDecodedOnce: a 2026-07-28 tools/call's params are decoded
// by the first reader (Message.paramsOf); the era's choice, the header
// checks and the protocol checks after it decode nothing again (they
// allocate nothing), and all read the same values.
func TestRequestIsDecodedOnce(t *testing.T) {
	// Not parallel: AllocsPerRun refuses to run beside other tests.
	m, perr := Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo_echo","arguments":{"message":"hi"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p1"}}}`))
	if perr != nil {
		t.Fatal(perr)
	}
	modern := &Modern{s: &Server{}}
	check := func() {
		if !IsModern(m, "") {
			t.Fatal("not modern")
		}
		if rerr := CheckHeaders(m, Version20260728, "tools/call", []string{"demo_echo"}); rerr != nil {
			t.Fatal(rerr)
		}
		if rerr := modern.Check(m); rerr != nil {
			t.Fatal(rerr)
		}
	}
	check() // the first reader decodes
	if n := testing.AllocsPerRun(100, check); n != 0 {
		t.Errorf("the checks after the first decode allocate %v times per request, want 0 (params decoded again)", n)
	}
	p, err := m.paramsOf()
	if err != nil || p.Name != "demo_echo" || string(p.Arguments) != `{"message":"hi"}` || string(p.Meta.ProgressToken) != `"p1"` ||
		p.Meta.ProtocolVersion == nil || *p.Meta.ProtocolVersion != Version20260728 {
		t.Errorf("decoded params: %+v, %v", p, err)
	}
}
