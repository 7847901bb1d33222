package mcpclient

// CgroupsOffForTest turns session cgroups off (the /proc fallback) until
// the returned function is called. Only for tests that are not parallel.
func CgroupsOffForTest() (restore func()) {
	cgroupsOff.Store(true)
	return func() { cgroupsOff.Store(false) }
}
