package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/quota"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/virtual"
)

// Virtual servers at the api (docs/virtual-servers.md): REST names one
// with ?virtual=<name>, the MCP endpoint with its path (/mcp/v/<name>,
// /sse/v/<name>; /messages uses its session's). A key bound to virtual
// servers (api.keys[].virtual_servers) may use only those: the default
// endpoints refuse it with forbidden naming the policy. Everything past
// that (what the set holds, its overrides and quotas) is decided by
// discovery and toolcall, which see the set's name on every request.
//
// The admin API (GET, PUT, DELETE /api/mcp/virtual-servers[/{name}])
// keeps the sets it makes in the config bucket's key "virtual_servers"
// (sharedstate.VirtualRecord), one value written with compare-and-set;
// every api, discovery and toolcall replica applies it as it changes
// (virtual.Live). config.yaml's sets are read-only through it.

// allowVirtual is the key policy: nil when caller may use the virtual
// server set ("" is the whole catalog), forbidden when its key is bound
// to others, not_found for a set no one defined.
func (s *Service) allowVirtual(caller Caller, set string) error {
	sets := s.virtual.Registry()
	if err := virtual.Check(caller.VirtualServers, set, virtual.PolicyKey, "the API key of user '"+caller.UserID+"'"); err != nil {
		label := set
		if _, known := sets.Get(set); !known && set != "" {
			label = "unknown" // never a caller's string as a label
		}
		s.metrics.virtualRefused.WithLabelValues(label).Inc()
		return err
	}
	_, err := sets.Resolve(set)
	return err
}

// virtualOf is the virtual server a REST request names (?virtual=),
// checked against the caller's key.
func (s *Service) virtualOf(c echo.Context) (string, error) {
	set := c.QueryParam("virtual")
	return set, s.allowVirtual(callerOf(c), set)
}

// followVirtual applies the admin API's virtual servers as the config
// bucket carries them, from the values present now (before the api
// serves) and on every change, until ctx ends (done is closed then).
func (s *Service) followVirtual(ctx context.Context) (<-chan struct{}, error) {
	s.watcher = sharedstate.NewWatcher(s.deps.KV, nil, s.log)
	s.watcher.FollowReconnects(s.deps.NC)
	s.watcher.OnChange(func(_, next sharedstate.Snapshot) { s.virtual.Apply(next.VirtualRevision, next.VirtualServers) })
	done, err := s.watcher.Start(ctx)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	return done, nil
}

// Sources of a virtual server in the admin views.
const (
	sourceConfig = "config.yaml"
	sourceAPI    = "api"
)

// virtualServerView is one virtual server as the admin API shows it.
type virtualServerView struct {
	config.VirtualServer
	// Source is config.yaml (read-only here) or api.
	Source string `json:"source"`
	// Shadowed marks an API set whose name config.yaml now defines: the
	// file's set is the one in force.
	Shadowed bool `json:"shadowed,omitempty"`
	// QuotaState is each quota with calls per window and what its current
	// window has counted so far (lists only; absent without such quotas).
	QuotaState []quotaState `json:"quota_state,omitempty"`
}

// quotaState is one quota of a set and what it counts now across every
// replica: the current window of a calls-per-window quota, the calls in
// flight of a concurrent one.
type quotaState struct {
	// Limit names the quota (virtual_servers[<set>].quotas[<i>]).
	Limit           string `json:"limit"`
	Calls           int    `json:"calls,omitempty"`
	IntervalSeconds int    `json:"interval_seconds,omitempty"`
	Concurrent      int    `json:"concurrent,omitempty"`
	// Window is the current window: the callers × tools that took calls,
	// the calls counted, and when it ends (quotas with calls).
	Window *quota.Usage `json:"window,omitempty"`
	// InFlight is the calls in flight now, every caller × tool together,
	// and how many toolcall replicas run them (quotas with concurrent).
	InFlight *quota.InFlight `json:"in_flight,omitempty"`
}

// virtualServersReply is GET /api/mcp/virtual-servers.
type virtualServersReply struct {
	VirtualServers []virtualServerView `json:"virtual_servers"`
	// Revision is the KV revision of the API's sets (0: none made yet).
	Revision uint64 `json:"revision"`
}

// virtualRoutes registers the admin-only virtual server routes.
func (s *Service) virtualRoutes(g *echo.Group) {
	g.GET("/mcp/virtual-servers", s.listVirtualServers, requireAdmin)
	g.GET("/mcp/virtual-servers/:name", s.getVirtualServer, requireAdmin)
	g.PUT("/mcp/virtual-servers/:name", s.putVirtualServer, requireAdmin)
	g.DELETE("/mcp/virtual-servers/:name", s.deleteVirtualServer, requireAdmin)
}

// virtualViews is every virtual server, config.yaml's first, as read
// from the bucket now (not a replica's possibly older copy).
func (s *Service) virtualViews(ctx context.Context) ([]virtualServerView, uint64, error) {
	rec, rev, err := sharedstate.ReadVirtual(ctx, s.deps.KV)
	if err != nil {
		return nil, 0, bus.Wrap(bus.CodeUnavailable, err, "the virtual servers cannot be read from the NATS KV bucket right now; retry shortly")
	}
	file := s.virtual.File()
	out := make([]virtualServerView, 0, len(file.Servers)+len(rec.VirtualServers))
	for _, vs := range file.Servers {
		out = append(out, virtualServerView{VirtualServer: vs, Source: sourceConfig})
	}
	for _, vs := range rec.VirtualServers {
		out = append(out, virtualServerView{VirtualServer: vs, Source: sourceAPI, Shadowed: virtual.FromFile(file, vs.Name)})
	}
	return out, rev, nil
}

// listVirtualServers serves every virtual server: config.yaml's and the
// admin API's, with servers, tools, overrides, tool_search, quotas and
// pinning of each.
func (s *Service) listVirtualServers(c echo.Context) error {
	ctx := c.Request().Context()
	views, rev, err := s.virtualViews(ctx)
	if err != nil {
		return err
	}
	if err := s.quotaStates(ctx, views); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, virtualServersReply{VirtualServers: views, Revision: rev})
}

// quotaStates fills each view's QuotaState from the quota bucket.
func (s *Service) quotaStates(ctx context.Context, views []virtualServerView) error {
	r := quotaReader{s: s}
	for i := range views {
		v := &views[i]
		for j, q := range v.Quotas {
			st, err := r.state(ctx, fmt.Sprintf("virtual_servers[%s].quotas[%d]", v.Name, j), virtual.QuotaGroup(v.Name, j), q)
			if err != nil {
				return err
			}
			v.QuotaState = append(v.QuotaState, st)
		}
	}
	return nil
}

// quotaReader reads quota states from the quota bucket, opened (never
// created) on first use: no bucket yet means nothing was counted.
type quotaReader struct {
	s  *Service
	kv jetstream.KeyValue
}

// state is the quota named limit, counted under group, and what it counts
// now.
func (r *quotaReader) state(ctx context.Context, limit, group string, q config.Quota) (quotaState, error) {
	st := quotaState{Limit: limit, Calls: q.Calls, IntervalSeconds: q.IntervalSeconds, Concurrent: q.Concurrent}
	unavailable := func(err error) (quotaState, error) {
		return quotaState{}, bus.Wrap(bus.CodeUnavailable, err, "the quota bucket cannot be read right now; retry shortly")
	}
	if r.kv == nil {
		js, err := jetstream.New(r.s.deps.NC)
		if err == nil {
			r.kv, err = js.KeyValue(ctx, r.s.deps.Names.QuotasBucket())
		}
		if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return unavailable(err)
		}
	}
	now := r.s.deps.Clock
	if q.Calls > 0 {
		u, err := quota.ReadUsage(ctx, r.kv, group, time.Duration(q.IntervalSeconds)*time.Second, now)
		if err != nil {
			return unavailable(err)
		}
		st.Window = &u
	}
	if q.Concurrent > 0 {
		f, err := quota.ReadInFlight(ctx, r.kv, group, now)
		if err != nil {
			return unavailable(err)
		}
		st.InFlight = &f
	}
	return st, nil
}

// getVirtualServer serves one virtual server.
func (s *Service) getVirtualServer(c echo.Context) error {
	views, _, err := s.virtualViews(c.Request().Context())
	if err != nil {
		return err
	}
	name := c.Param("name")
	// config.yaml's comes first, and is the one in force on a clash.
	if i := slices.IndexFunc(views, func(v virtualServerView) bool { return v.Name == name }); i >= 0 {
		return c.JSON(http.StatusOK, views[i])
	}
	return virtualNotFound(name)
}

func virtualNotFound(name string) error {
	return bus.Errorf(bus.CodeNotFound, "virtual server '%s' is not defined", name)
}

// readOnlyVirtual refuses (409) a change of a set config.yaml defines.
func readOnlyVirtual(name string) error {
	return &statusError{status: http.StatusConflict, err: &bus.Error{Code: bus.CodeConfigError,
		Message: fmt.Sprintf("virtual server '%s' is defined in config.yaml, which the admin API does not change; edit config.yaml (and restart) or use another name", name),
		Details: map[string]any{"virtual_server": name, "source": sourceConfig}}}
}

// putVirtualServer creates or replaces the API's virtual server named by
// the path: 201 when created, 200 when replaced, with the set as stored.
// The body is checked with config.yaml's rules and messages
// (config.ValidateVirtualServer); a field it does not know is refused.
func (s *Service) putVirtualServer(c echo.Context) error {
	name := c.Param("name")
	vs, err := decodeVirtualServer(c, name)
	if err != nil {
		return err
	}
	if virtual.FromFile(s.virtual.File(), name) {
		return readOnlyVirtual(name)
	}
	var before *config.VirtualServer
	_, err = s.editVirtual(c.Request().Context(), func(list []config.VirtualServer) ([]config.VirtualServer, error) {
		before = nil
		if i := slices.IndexFunc(list, func(v config.VirtualServer) bool { return v.Name == name }); i >= 0 {
			old := list[i]
			before = &old
			list[i] = vs
			return list, nil
		}
		return append(list, vs), nil
	})
	if err != nil {
		return err
	}
	status, action := http.StatusOK, "put_virtual_server"
	if before == nil {
		status = http.StatusCreated
	}
	s.auditVirtual(c, action, name, before, &vs)
	return c.JSON(status, virtualServerView{VirtualServer: vs, Source: sourceAPI})
}

// deleteVirtualServer removes the API's virtual server named by the path
// (204); keys bound to it can use nothing through it from then on.
func (s *Service) deleteVirtualServer(c echo.Context) error {
	name := c.Param("name")
	if virtual.FromFile(s.virtual.File(), name) {
		return readOnlyVirtual(name)
	}
	var before *config.VirtualServer
	_, err := s.editVirtual(c.Request().Context(), func(list []config.VirtualServer) ([]config.VirtualServer, error) {
		i := slices.IndexFunc(list, func(v config.VirtualServer) bool { return v.Name == name })
		if i < 0 {
			return nil, virtualNotFound(name)
		}
		old := list[i]
		before = &old
		return slices.Delete(list, i, i+1), nil
	})
	if err != nil {
		return err
	}
	s.auditVirtual(c, "delete_virtual_server", name, before, nil)
	return c.NoContent(http.StatusNoContent)
}

// editVirtual is the one write path of the admin API's virtual servers:
// edit applied to the current list and written whole with
// compare-and-set (sharedstate.UpdateVirtual), so two admins' writes
// never lose one another and a failed write changes nothing.
func (s *Service) editVirtual(ctx context.Context, edit func([]config.VirtualServer) ([]config.VirtualServer, error)) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	rev, err := sharedstate.UpdateVirtual(ctx, s.deps.KV, func(rec sharedstate.VirtualRecord) (sharedstate.VirtualRecord, error) {
		list, err := edit(slices.Clone(rec.VirtualServers))
		return sharedstate.VirtualRecord{VirtualServers: list}, err
	})
	if be := bus.AsError(err); err != nil && be.Code != bus.CodeInternal {
		return 0, err // the edit's own refusal
	}
	if err != nil {
		return 0, &statusError{status: http.StatusServiceUnavailable, err: bus.Wrap(bus.CodeUnavailable, err,
			"the virtual servers could not be stored in the NATS KV bucket; nothing was changed. Retry when NATS is reachable")}
	}
	return rev, nil
}

// decodeVirtualServer reads a PUT body: one virtual server, its name the
// path's (a body name, if any, must agree), no unknown field, valid by
// config.yaml's rules. pinning is config.yaml's only: it raises the
// policy of the servers a set lists for every caller, which the services
// apply when they start.
func decodeVirtualServer(c echo.Context, name string) (config.VirtualServer, error) {
	var raw json.RawMessage
	if err := decodeBody(c, &raw); err != nil {
		return config.VirtualServer{}, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return config.VirtualServer{}, unprocessable("request body is required: a virtual server such as {\"servers\": [\"demo\"], \"tools\": [\"demo_echo\"]}")
	}
	var vs config.VirtualServer
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&vs); err != nil {
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ):
			return vs, unprocessable(fmt.Sprintf("%s: cannot hold a JSON %s", typ.Field, typ.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return vs, unprocessable(strings.TrimPrefix(err.Error(), "json: ") + ": a virtual server has name, description, servers, tools, overrides, tool_search, quotas and pinning")
		}
		return vs, unprocessable("request body is not a virtual server object")
	}
	if vs.Name != "" && vs.Name != name {
		return vs, unprocessable(fmt.Sprintf("name: %q differs from the path's %q; leave it out or make them equal", vs.Name, name))
	}
	vs.Name = name
	if ps := config.ValidateVirtualServer(vs); config.HasErrors(ps) {
		var msgs []string
		var problems []map[string]string
		for _, p := range ps {
			if p.Severity == config.SeverityError {
				msgs = append(msgs, p.Field+": "+p.Message)
				problems = append(problems, map[string]string{"field": p.Field, "message": p.Message})
			}
		}
		return vs, &statusError{status: http.StatusUnprocessableEntity, err: &bus.Error{Code: bus.CodeInvalidRequest,
			Message: fmt.Sprintf("virtual server '%s': %s", name, strings.Join(msgs, "; ")),
			Details: map[string]any{"virtual_server": name, "problems": problems}}}
	}
	if vs.Pinning != "" {
		return vs, unprocessable("pinning: is set in config.yaml's virtual_servers only (it raises the pinning policy of the servers the set lists, for every caller); leave it out here")
	}
	return vs, nil
}

// auditVirtual writes the record of an admin API change of a virtual
// server: who, which action, which set, and which of its fields changed
// (names only).
func (s *Service) auditVirtual(c echo.Context, action, name string, before, after *config.VirtualServer) {
	ch := audit.Change{Op: "changed", Keys: changedFields(before, after)}
	switch {
	case before == nil:
		ch.Op = "added"
	case after == nil:
		ch.Op = "removed"
	}
	s.deps.Audit.Write(c.Request().Context(), audit.Record{
		Kind: audit.KindConfig, User: callerOf(c).UserID, Action: action, VirtualServer: name, Changes: []audit.Change{ch},
		RequestID: c.Response().Header().Get(echo.HeaderXRequestID),
	})
}

// changedFields is the top-level fields of a and b that differ, sorted
// (nil when either is nil).
func changedFields(a, b *config.VirtualServer) []string {
	if a == nil || b == nil {
		return nil
	}
	fields := func(v *config.VirtualServer) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		data, _ := json.Marshal(v)
		_ = json.Unmarshal(data, &m)
		return m
	}
	fa, fb := fields(a), fields(b)
	var out []string
	for k, va := range fa {
		if !bytes.Equal(va, fb[k]) {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
