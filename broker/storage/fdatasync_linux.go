package storage

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back
// (fdatasync(2)), retrying on EINTR.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
