//go:build !unix || aix || (solaris && !illumos)

package idgen

// lockFile takes the lock file name on a system without flock(2) by creating
// it exclusively; see lockExclusive.
func lockFile(name string) (release func() error, err error) { return lockExclusive(name) }
