package orderedjson

import (
	"strings"
	"testing"
)

func TestRoundTripKeepsKeyOrder(t *testing.T) {
	t.Parallel()
	in := `{"z":1,"a":{"y":[true,null,"<x>"],"b":2.50},"m":"v","z":3}`
	v, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Encode(v, false)
	if err != nil {
		t.Fatal(err)
	}
	// A repeated key keeps its first position and its last value; numbers
	// and HTML characters are written as they came.
	if want := `{"z":3,"a":{"y":[true,null,"<x>"],"b":2.50},"m":"v"}`; string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	o := v.(*Object)
	c := Clone(o).(*Object)
	c.Set("new", "x")
	c.Delete("z")
	if strings.Join(o.Keys(), ",") != "z,a,m" || strings.Join(c.Keys(), ",") != "a,m,new" {
		t.Fatalf("clone is not independent: %v %v", o.Keys(), c.Keys())
	}
	if Kind(o) != "an object" || Kind(o.Value("m")) != "a string" || o.Value("missing") != nil {
		t.Fatal("Kind/Value")
	}
	if _, err := Decode([]byte(`{"a":1} {}`)); err == nil {
		t.Fatal("trailing data accepted")
	}
}

func TestMembersKeepsRawValues(t *testing.T) {
	t.Parallel()
	keys, vals, err := Members([]byte(`{"b": {"x": 1}, "a": [1, 2]}`))
	if err != nil || strings.Join(keys, ",") != "b,a" || string(vals[0]) != `{"x": 1}` || string(vals[1]) != `[1, 2]` {
		t.Fatalf("Members = %v %q %v", keys, vals, err)
	}
	if _, _, err := Members([]byte(`[1]`)); err == nil {
		t.Fatal("an array accepted as an object")
	}
}

// TestRepeatedMemberQuickPathAgrees checks the allocation-free path of
// RepeatedMember against the decoder's (Members) on the shapes JSON-RPC
// messages take, and that it allocates nothing for them.
func TestRepeatedMemberQuickPathAgrees(t *testing.T) {
	// Not parallel: AllocsPerRun refuses to run beside other tests.
	for _, c := range []struct{ in, want string }{
		{`{}`, ""},
		{` { } `, ""},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","name":"b"}}`, ""},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","method":"tools/call"}`, "method"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list","Method":"tools/call"}`, "Method"},
		{`{"id":"x\"y","ID":1}`, "ID"},
		{`{"a":[1,{"a":2},"]"],"b":{"c":"}"},"A":null}`, "A"},
		{` {"a" : 1 , "b" : true , "c" : -1.5e3 } `, ""},
		{`{"name":"demo_t0","name":"demo_echo","arguments":{}}`, "name"},
		{`{"k":1,"K":2}`, "K"},      // Kelvin sign: the slow path
		{`{"s":1,"ſ":2}`, "ſ"},      // long s: the slow path
		{`{"\u0061":1,"a":2}`, "a"}, // an escaped name: the slow path
		{`[1,2]`, ""},               // not an object
		{`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"a":18}`, "a"},
	} {
		if got := RepeatedMember([]byte(c.in)); got != c.want {
			t.Errorf("RepeatedMember(%s) = %q, want %q", c.in, got, c.want)
		}
	}
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo_echo","arguments":{"message":"ping","n":[1,2,{"x":"y"}]}}}`)
	if n := testing.AllocsPerRun(100, func() { _ = RepeatedMember(msg) }); n != 0 {
		t.Errorf("RepeatedMember of a tools/call allocates %v times, want 0", n)
	}
}
