// Package tracingtest is an OTLP/HTTP trace receiver for tests: an
// httptest server that decodes every ExportTraceServiceRequest the
// exporters post and keeps the spans, flattened, for assertions.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Span is one received span.
type Span struct {
	Service  string // the resource's service.name
	Name     string
	TraceID  string // hex
	SpanID   string
	ParentID string // "" for a root
	Kind     string // SPAN_KIND_SERVER, …
	Attrs    map[string]string
	// Links are the linked spans' trace ids.
	Links []string
	// Error reports an error status.
	Error bool
}

// Receiver collects what exporters send to URL (base URL: exporters post
// to URL + "/v1/traces").
type Receiver struct {
	URL string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every export
	spans   []Span
	dumps   []string // each request as protojson, for greps
	headers []http.Header
}

// NewReceiver starts a receiver closed at the end of the test.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/v1/traces" || req.Method != http.MethodPost {
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ex collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &ex); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range ex.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{Service: service, Name: sp.GetName(), TraceID: hex.EncodeToString(sp.GetTraceId()),
					SpanID: hex.EncodeToString(sp.GetSpanId()), ParentID: hex.EncodeToString(sp.GetParentSpanId()),
					Kind: sp.GetKind().String(), Attrs: attrs(sp.GetAttributes()), Error: sp.GetStatus().GetCode() == 2}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, hex.EncodeToString(l.GetTraceId()))
				}
				got = append(got, s)
			}
		}
	}
	dump, _ := protojson.Marshal(&ex)
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.dumps = append(r.dumps, string(dump))
	r.headers = append(r.headers, req.Header.Clone())
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// attrs flattens attributes to strings (AnyValue's text form).
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch {
		case v.GetStringValue() != "":
			m[kv.GetKey()] = v.GetStringValue()
		default:
			b, _ := protojson.Marshal(v)
			m[kv.GetKey()] = string(b)
		}
	}
	return m
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Dump is every export request received so far as protojson, one per line:
// what a grep for secrets reads.
func (r *Receiver) Dump() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.dumps, "\n")
}

// Wait blocks until ok holds for the spans received (checked after each
// export), or fails the test after timeout.
func (r *Receiver) Wait(t testing.TB, timeout time.Duration, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		spans, changed := append([]Span(nil), r.spans...), r.changed
		r.mu.Unlock()
		if ok(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s within %s; received %d spans:\n%s", what, timeout, len(spans), Format(spans))
		}
	}
}

// Format lists spans one a line (for failure messages).
func Format(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s trace=%s span=%s parent=%s %s %v\n", s.Service, s.Name, s.TraceID, s.SpanID, s.ParentID, s.Kind, s.Attrs)
	}
	return b.String()
}

// Trace returns the spans of traceID.
func Trace(spans []Span, traceID string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// Connected reports whether spans (one trace) form one tree: exactly one
// span without a parent among them, and every other span's parent present.
func Connected(spans []Span) bool {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	roots := 0
	for _, s := range spans {
		switch {
		case s.ParentID == "":
			roots++
		case !ids[s.ParentID]:
			return false
		}
	}
	return roots == 1
}
