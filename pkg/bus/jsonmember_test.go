package bus

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMemberEdits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, key, without, with string
	}{
		{`{"a":1,"uri":"x","b":2}`, "uri", `{"a":1,"b":2}`, `{"a":1,"uri":"Y","b":2}`},
		{`{"uri":"x","b":2}`, "uri", `{"b":2}`, `{"uri":"Y","b":2}`},
		{`{"a":1,"uri":"x"}`, "uri", `{"a":1}`, `{"a":1,"uri":"Y"}`},
		{`{"uri":"x"}`, "uri", `{}`, `{"uri":"Y"}`},
		{` { "t" : "a \"uri\": {[" , "uri" : "x" , "n" : [1, {"uri": "no"}] } `, "uri",
			` { "t" : "a \"uri\": {[" , "n" : [1, {"uri": "no"}] } `, ` { "t" : "a \"uri\": {[" , "uri" : "Y" , "n" : [1, {"uri": "no"}] } `},
		{`{"n":{"uri":"nested"},"text":"}"}`, "uri", `{"n":{"uri":"nested"},"text":"}"}`, `{"n":{"uri":"nested"},"text":"}"}`},
		{`{"\u0075ri":"x"}`, "uri", `{}`, `{"\u0075ri":"Y"}`},
		{`{"a":true,"b":null,"c":-1.5e3,"uri":"x"}`, "uri", `{"a":true,"b":null,"c":-1.5e3}`, `{"a":true,"b":null,"c":-1.5e3,"uri":"Y"}`},
		{`[1,2]`, "uri", `[1,2]`, `[1,2]`},
		{`{}`, "uri", `{}`, `{}`},
	} {
		if got := string(WithoutMember([]byte(c.in), c.key)); got != c.without {
			t.Errorf("WithoutMember(%s) = %s, want %s", c.in, got, c.without)
		}
		if got := string(WithMember([]byte(c.in), c.key, []byte(`"Y"`))); got != c.with {
			t.Errorf("WithMember(%s) = %s, want %s", c.in, got, c.with)
		}
		if json.Valid([]byte(c.in)) && !json.Valid(WithoutMember([]byte(c.in), c.key)) {
			t.Errorf("WithoutMember(%s) is not valid JSON", c.in)
		}
	}
}

// TestRewriteContentsKeepsTheRest: only the uri changes; every other
// member is the upstream's, byte for byte (a blob is not re-encoded).
func TestRewriteContentsKeepsTheRest(t *testing.T) {
	t.Parallel()
	in := `{"uri":"demo://greeting","mimeType":"text/plain","text":"<b>\u00e9 \"q\"</b>","_meta":{"uri":"keep"}}`
	got := string(RewriteContents("fed", json.RawMessage(in)))
	want := `{"uri":"mcpbus://fed/demo://greeting","mimeType":"text/plain","text":"<b>\u00e9 \"q\"</b>","_meta":{"uri":"keep"}}`
	if got != want {
		t.Fatalf("RewriteContents = %s, want %s", got, want)
	}
	var a, b map[string]any
	_ = json.Unmarshal([]byte(in), &a)
	_ = json.Unmarshal([]byte(got), &b)
	a["uri"] = "mcpbus://fed/demo://greeting"
	if !reflect.DeepEqual(a, b) {
		t.Errorf("decoded: %v, want %v", b, a)
	}
	for _, same := range []string{`{"text":"no uri"}`, `{"uri":""}`, `{"uri":5}`} {
		if got := string(RewriteContents("fed", json.RawMessage(same))); got != same {
			t.Errorf("RewriteContents(%s) = %s, want it unchanged", same, got)
		}
	}
}

func TestElements(t *testing.T) {
	t.Parallel()
	got, ok := Elements([]byte(` [ {"a":"],"} , "x" ,[1,[2]], 3 ] `))
	want := []string{`{"a":"],"}`, `"x"`, `[1,[2]]`, `3`}
	if !ok || len(got) != len(want) {
		t.Fatalf("Elements = %q %v", got, ok)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("element %d = %s, want %s", i, got[i], want[i])
		}
	}
	if got, ok := Elements([]byte(`[]`)); !ok || len(got) != 0 {
		t.Errorf("Elements([]) = %q %v", got, ok)
	}
	for _, bad := range []string{`{}`, `[1,`, `[1 2]`, ``} {
		if _, ok := Elements([]byte(bad)); ok {
			t.Errorf("Elements(%q) ok", bad)
		}
	}
}
