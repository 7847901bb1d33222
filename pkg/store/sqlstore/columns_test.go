package sqlstore

import (
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestColumnTablesCoverEveryField: each field of the row types is named by
// exactly one column, so a field added to store.Task without its column (or
// a column pointing at the wrong field) fails here before any SQL runs.
func TestColumnTablesCoverEveryField(t *testing.T) {
	t.Parallel()
	checkColumns(t, taskColumns)
	checkColumns(t, tokenColumns)
	checkColumns(t, connectionColumns)
}

func checkColumns[T any](t *testing.T, cols []column[T]) {
	t.Helper()
	var row T
	v := reflect.ValueOf(&row).Elem()
	byAddr := map[uintptr]string{}
	for i := range v.NumField() {
		byAddr[v.Field(i).Addr().Pointer()] = v.Type().Field(i).Name
	}
	seen := map[string]string{}
	for _, c := range cols {
		name, ok := byAddr[reflect.ValueOf(c.field(&row)).Pointer()]
		if !ok {
			t.Fatalf("%T column %s points outside the row", row, c.name)
		}
		if prev, dup := seen[name]; dup {
			t.Fatalf("%T field %s is named by columns %s and %s", row, name, prev, c.name)
		}
		seen[name] = c.name
		_ = encodeForTest(c.field(&row)) // every field type has an encoding
	}
	if len(seen) != v.NumField() {
		for i := range v.NumField() {
			if _, ok := seen[v.Type().Field(i).Name]; !ok {
				t.Errorf("%T field %s has no column", row, v.Type().Field(i).Name)
			}
		}
	}
}

var testDialect = Dialect{
	Backend: "test", Clock: "clock()", TimeType: "ts", Interval: "interval(%s)", DurationUnit: time.Millisecond,
	ClaimLock: "CLAIM LOCK", RowLock: "ROW LOCK",
	EncodeTime:        func(t time.Time) any { return t },
	IsUniqueViolation: func(error) bool { return false },
}

func encodeForTest(field any) any { return testDialect.encode(field) }

// TestStatementsAreRendered: no token is left in a statement, and the
// statements that read the clock take now as $1.
func TestStatementsAreRendered(t *testing.T) {
	t.Parallel()
	q := renderStatements(testDialect)
	all := map[string]string{}
	for _, group := range []any{q.tasks, q.tokens, q.connections} {
		v := reflect.ValueOf(group)
		for i := range v.NumField() {
			all[v.Type().Name()+"."+v.Type().Field(i).Name] = v.Field(i).String()
		}
	}
	for name, sql := range all {
		if sql == "" || strings.ContainsAny(sql, "{}") {
			t.Errorf("%s is not rendered: %q", name, sql)
		}
		if strings.Contains(sql, "clock()") && !strings.Contains(sql, "COALESCE(CAST($1 AS ts), clock())") {
			t.Errorf("%s reads the clock without the now parameter: %s", name, sql)
		}
	}
	for name, sql := range map[string]string{"claim polls": q.tasks.claimPolls, "claim cancels": q.tasks.claimCancels,
		"claim notifications": q.tasks.claimNotifications} {
		if !strings.Contains(sql, "CLAIM LOCK") {
			t.Errorf("%s has no claim lock: %s", name, sql)
		}
	}
	if !strings.Contains(q.tasks.lockUnderLease, "ROW LOCK") || !strings.Contains(q.tasks.lockUnderNotification, "ROW LOCK") {
		t.Error("the reads before a write under a lease have no row lock")
	}
	// The INSERT takes now, then one parameter per written column.
	highest := 0
	for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(q.tasks.insert, -1) {
		n, _ := strconv.Atoi(m[1])
		highest = max(highest, n)
	}
	if want := len(taskInsertColumns) + 1; highest != want {
		t.Errorf("insert's last parameter is $%d, want $%d: %s", highest, want, q.tasks.insert)
	}
	if !strings.Contains(q.tasks.list, "CAST($2 AS TEXT)") || !strings.Contains(q.tasks.claimPolls, "status IN "+nonTerminalSQL) {
		t.Errorf("statements: list %s\nclaim polls %s", q.tasks.list, q.tasks.claimPolls)
	}
	if nonTerminalSQL != "('submitted', 'working', 'input_required')" {
		t.Errorf("non-terminal statuses rendered as %s", nonTerminalSQL)
	}
}
