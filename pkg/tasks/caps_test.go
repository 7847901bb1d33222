package tasks_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/tasks"
)

func TestNormalizeResult(t *testing.T) {
	big := `{"k":"` + strings.Repeat("v", 2000) + `"}`
	tests := []struct {
		name                string
		raw                 string
		max, preview        int
		wantResult, wantPre string
		wantTrunc           bool
		wantErr             string
	}{
		{"absent", "", 1024, 64, "", "", false, ""},
		{"compacted", `{ "a" : [1, 2] , "é": "ü" }`, 1024, 64, `{"a":[1,2],"é":"ü"}`, "", false, ""},
		{"exactly at the limit", `"` + strings.Repeat("a", 1022) + `"`, 1024, 64, `"` + strings.Repeat("a", 1022) + `"`, "", false, ""},
		{"oversized object previews compact JSON", big, 1024, 10, "", `{"k":"vvvv`, true, ""},
		{"oversized string previews the string", `"` + strings.Repeat("ü", 600) + `"`, 1024, 5, "", "üüüüü", true, ""},
		{"invalid JSON", `{"a":NaN}`, 1024, 64, "", "", false, "MCP task result is not valid JSON: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var raw json.RawMessage
			if tc.raw != "" {
				raw = json.RawMessage(tc.raw)
			}
			got, err := tasks.NormalizeResult(raw, tc.max, tc.preview)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want prefix %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got.Result) != tc.wantResult || got.Preview != tc.wantPre || got.Truncated != tc.wantTrunc {
				t.Fatalf("got result=%.40s preview=%q truncated=%v err=%v", got.Result, got.Preview, got.Truncated, err)
			}
			if got.Result != nil && !json.Valid(got.Result) {
				t.Fatal("stored result is not valid JSON")
			}
		})
	}
}

func TestEncodeResultRefusesNaNAndInf(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}} {
		_, err := tasks.EncodeResult(v)
		if err == nil || !strings.HasPrefix(err.Error(), "MCP task result is not valid JSON: ") {
			t.Fatalf("EncodeResult(%v) = %v", v, err)
		}
	}
	got, err := tasks.EncodeResult(map[string]any{"a": "<b>"})
	if err != nil || string(got) != `{"a":"<b>"}` {
		t.Fatalf("EncodeResult = %s, %v", got, err)
	}
}

func TestCheckPayload(t *testing.T) {
	under := `{"q":"` + strings.Repeat("a", tasks.MaxPayloadBytes-8) + `"}`
	over := `{"q":"` + strings.Repeat("a", tasks.MaxPayloadBytes-7) + `"}`
	if _, err := tasks.CheckPayload("input_required", json.RawMessage(under)); err != nil {
		t.Fatalf("64 KiB payload refused: %v", err)
	}
	for kind, want := range map[string]string{
		"input_required":  "MCP task input_required payload exceeds the 65536-byte limit",
		"result_artifact": "MCP task result_artifact payload exceeds the 65536-byte limit",
	} {
		if _, err := tasks.CheckPayload(kind, json.RawMessage(over)); err == nil || err.Error() != want {
			t.Fatalf("%s: %v, want %q", kind, err, want)
		}
	}
	// Whitespace does not count: the payload is measured compact.
	spaced := `{"q" :  "` + strings.Repeat("a", tasks.MaxPayloadBytes-8) + `"   }`
	if _, err := tasks.CheckPayload("input_required", json.RawMessage(spaced)); err != nil {
		t.Fatalf("compact size not used: %v", err)
	}
}

func TestBoundErrors(t *testing.T) {
	long := strings.Repeat("é", 5000)
	if got := tasks.BoundError(long); len([]rune(got)) != 4000 {
		t.Fatalf("BoundError kept %d characters", len([]rune(got)))
	}
	if got := tasks.BoundView(long); len([]rune(got)) != 500 {
		t.Fatalf("BoundView kept %d characters", len([]rune(got)))
	}
	if got := tasks.BoundError("short"); got != "short" {
		t.Fatalf("BoundError(short) = %q", got)
	}
}

func TestNormalizeAppliesEveryCap(t *testing.T) {
	s := tasks.DefaultSettings()
	huge := json.RawMessage(`{"q":"` + strings.Repeat("a", 70000) + `"}`)
	if _, err := tasks.Normalize(tasks.StatusReply{Status: "input_required", InputRequired: huge}, s); err == nil ||
		err.Error() != "MCP task input_required payload exceeds the 65536-byte limit" {
		t.Fatalf("input_required cap: %v", err)
	}
	if _, err := tasks.Normalize(tasks.StatusReply{Status: "completed", ResultArtifact: huge}, s); err == nil ||
		err.Error() != "MCP task result_artifact payload exceeds the 65536-byte limit" {
		t.Fatalf("artifact cap: %v", err)
	}
	o, err := tasks.Normalize(tasks.StatusReply{Status: "running", Error: strings.Repeat("e", 4100)}, s)
	if err != nil || o.Status != "working" || len(o.Error) != 4000 {
		t.Fatalf("normalize running: %+v %v", o, err)
	}
}
