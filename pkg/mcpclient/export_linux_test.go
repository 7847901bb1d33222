//go:build linux

package mcpclient

// CgroupsOffForTest turns session cgroups off (the /proc fallback) until
// the returned function is called. Only for tests that are not parallel.
func CgroupsOffForTest() (restore func()) {
	cgroupsOff.Store(true)
	return func() { cgroupsOff.Store(false) }
}

// CgroupBaseForTest is where session cgroups are created ("" without).
func CgroupBaseForTest() string { return cgroupBase() }

// SweepStaleCgroupsForTest runs the start-up sweep of base again.
func SweepStaleCgroupsForTest(base string) { sweepStaleCgroups(base) }
