package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrDirLocked is returned by LockDir when another process holds the lock.
var ErrDirLocked = errors.New("storage: data directory is in use by another process")

// LockDir takes an exclusive flock on dir/.lock (creating dir), so two
// processes cannot share a data directory. The holder's pid is written in
// the file and named in the error. The lock dies with the process, so a
// crash never leaves a stale lock. unlock releases it.
func LockDir(dir string) (unlock func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b[:n]))
			if _, perr := strconv.Atoi(holder); perr == nil {
				return nil, fmt.Errorf("%w: %s is locked by pid %s", ErrDirLocked, dir, holder)
			}
			return nil, fmt.Errorf("%w: %s", ErrDirLocked, dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
			return fmt.Errorf("unlock %s: %w", dir, err)
		}
		return nil
	}, nil
}
