package auth

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// checkInterval is how often a watched file is stat'ed at most. Reloads
// are driven by the code that reads the value (a TLS handshake, a SASL
// exchange), so an idle gateway does no work; polling rather than inotify
// also follows Kubernetes secret mounts, whose files change by a symlink
// swap.
const checkInterval = time.Second

// rereads counts Reread calls. A watched value read before the latest
// one is read again from its files at its next use.
var rereads atomic.Uint64

// Reread makes every watched file in the process (listener and admin TLS
// certificates, keys and client CAs; SASL users files; JWKS files) be
// read again at its next use, changed or not: a configuration reload
// calls it, so that a certificate rotated in a way the stat check cannot
// see (rewritten in place within the same second, same size) is picked up
// at once. A file that fails to read keeps its previous version, as at
// any check. It is process-wide: every gateway in the process re-reads
// (which costs one read of each file and changes nothing else).
func Reread() { rereads.Add(1) }

// fileStamp identifies one version of a file: a replaced file (atomic
// rename, symlink swap) has a new inode; one rewritten in place has a new
// mtime or size.
type fileStamp struct {
	mod   time.Time
	size  int64
	inode uint64
}

func stampOf(fi os.FileInfo) fileStamp {
	s := fileStamp{mod: fi.ModTime(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.inode = st.Ino
	}
	return s
}

// watched holds a value loaded from one or more files and reloads it when
// any of them changes. A failed reload keeps the previous value (and is
// retried at the next check): a certificate replaced before its key, or a
// file caught half-written, must not take the listener down.
type watched[T any] struct {
	paths []string
	load  func() (T, error)
	log   *slog.Logger
	what  string

	mu        sync.Mutex
	cur       T
	stamps    []fileStamp
	lastCheck time.Time
	reread    uint64 // rereads as of the last load
	now       func() time.Time
}

// newWatched loads the value once; an error here is the caller's to report.
func newWatched[T any](what string, log *slog.Logger, load func() (T, error), paths ...string) (*watched[T], error) {
	return newWatchedFrom(what, log, nil, nil, load, paths...)
}

// newWatchedFrom is newWatched with the first value built by first
// instead of load, when first is not nil: a value built from what
// configuration validation already parsed (configs.TLSMaterial), so the
// files are not parsed again until they change. seen are the files as
// they were when that value was read (os.Stat by path): a file replaced
// since then is a change at the first check, and load runs.
func newWatchedFrom[T any](what string, log *slog.Logger, first func() (T, error), seen map[string]os.FileInfo, load func() (T, error), paths ...string) (*watched[T], error) {
	w := &watched[T]{paths: paths, load: load, log: log, what: what, now: time.Now}
	stamps, err := w.stat()
	if err != nil {
		return nil, err
	}
	if first == nil {
		first = load
	} else {
		for i, p := range paths {
			if fi, ok := seen[p]; ok {
				stamps[i] = stampOf(fi)
			}
		}
	}
	v, err := first()
	if err != nil {
		return nil, err
	}
	w.cur, w.stamps, w.lastCheck, w.reread = v, stamps, w.now(), rereads.Load()
	return w, nil
}

func (w *watched[T]) stat() ([]fileStamp, error) {
	out := make([]fileStamp, len(w.paths))
	for i, p := range w.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.what, err)
		}
		out[i] = stampOf(fi)
	}
	return out, nil
}

// get returns the current value, reloading it first when checkInterval has
// passed and a file changed, or when Reread was called since the last
// load.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	epoch := rereads.Load()
	forced := epoch != w.reread
	if !forced && now.Sub(w.lastCheck) < checkInterval {
		return w.cur
	}
	w.lastCheck, w.reread = now, epoch
	stamps, err := w.stat()
	if err != nil {
		w.log.Warn("reload failed; keeping the previous version", "what", w.what, "err", err)
		return w.cur
	}
	if !forced && sameStamps(stamps, w.stamps) {
		return w.cur
	}
	v, err := w.load()
	if err != nil {
		w.log.Warn("reload failed; keeping the previous version", "what", w.what, "err", err)
		return w.cur
	}
	w.cur, w.stamps = v, stamps
	w.log.Info("reloaded", "what", w.what, "forced", forced)
	return w.cur
}

func sameStamps(a, b []fileStamp) bool {
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size || a[i].inode != b[i].inode {
			return false
		}
	}
	return true
}

// readSmallFile reads a file of at most max bytes; secrets and PEM files
// are small, and a mistaken path (a device) must not fill memory.
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return data, nil
}
