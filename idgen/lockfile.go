package idgen

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// lockHeld is the error of a lock file that another holder has.
type lockHeld struct {
	pid   string // the holder's process id as it recorded it, or ""
	stale bool   // the lock outlives a crashed holder until removed
}

func (e *lockHeld) Error() string { return "lock file held by process " + e.pid }

// recordHolder writes this process's id into the lock file f, for the error
// of the next process that tries it.
func recordHolder(f *os.File) {
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
}

// readHolder returns the process id recorded in the lock file r, or "".
func readHolder(r io.ReaderAt) string {
	b := make([]byte, 24)
	n, _ := r.ReadAt(b, 0)
	pid := b[:n]
	for len(pid) > 0 && (pid[len(pid)-1] == '\n' || pid[len(pid)-1] == '\r') {
		pid = pid[:len(pid)-1]
	}
	if _, err := strconv.ParseUint(string(pid), 10, 31); err != nil {
		return ""
	}
	return string(pid)
}

// lockExclusive takes the lock file name by creating it, failing with a
// *lockHeld if it exists; release removes it. A crashed holder leaves the
// file behind. It is the lock of systems without flock(2), and works
// everywhere.
func lockExclusive(name string) (release func() error, err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		held := &lockHeld{stale: true}
		if f, err := os.Open(name); err == nil {
			held.pid = readHolder(f)
			f.Close()
		}
		return nil, held
	}
	if err != nil {
		return nil, err
	}
	recordHolder(f)
	if err := f.Close(); err != nil {
		os.Remove(name)
		return nil, err
	}
	return func() error { return os.Remove(name) }, nil
}
