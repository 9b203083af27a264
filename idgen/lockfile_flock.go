//go:build unix && !aix && (illumos || !solaris)

package idgen

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on the lock file name, creating it,
// or fails with a *lockHeld if another open file holds it, in this process
// or another. The kernel releases the lock when its holder exits, however
// it exits; release releases it at once.
func lockFile(name string) (release func() error, err error) {
	// The descriptor is close-on-exec, so child processes do not inherit
	// the lock.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		var held error = err
		if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EAGAIN) {
			held = &lockHeld{pid: readHolder(f)}
		}
		f.Close()
		return nil, held
	}
	recordHolder(f)
	return func() error {
		err := flock(f, syscall.LOCK_UN)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// flock applies flock(2) to f, retrying when a signal interrupts it.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how)
			if ferr != syscall.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if ferr != nil {
		return os.NewSyscallError("flock", ferr)
	}
	return nil
}
