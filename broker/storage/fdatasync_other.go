//go:build !linux

package storage

import "os"

// fdatasync is f.Sync where there is no fdatasync(2): on macOS that is
// F_FULLFSYNC, which also flushes the drive's cache.
func fdatasync(f *os.File) error { return f.Sync() }
