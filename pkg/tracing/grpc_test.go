package tracing_test

import (
	"context"
	"net"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// grpcCollector is an OTLP/gRPC trace service that hands every export's
// span names to a channel.
type grpcCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	names chan string
}

func (c *grpcCollector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				c.names <- sp.GetName()
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// testGRPC: protocol grpc exports to observability.tracing.endpoint over
// OTLP/gRPC. Called from TestTracing (the provider is process-wide).
func testGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &grpcCollector{names: make(chan string, 16)}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	shutdown, err := tracing.Setup(context.Background(), tracing.Options{Enabled: true, Protocol: "grpc", Endpoint: "http://" + ln.Addr().String(), SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Start(context.Background(), "over grpc")
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-col.names; got != "over grpc" {
		t.Errorf("collector got span %q", got)
	}
}
