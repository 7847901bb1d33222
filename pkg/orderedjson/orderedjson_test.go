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
