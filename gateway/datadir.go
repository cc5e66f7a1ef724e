package gateway

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// A start that fails (a busy port, say) must not leave behind a data
// directory it created: the built-in broker is opened, and creates its
// directory, before Start binds the listeners. Open notes the directory
// the broker is about to create (newDataDir) and a failed Open or Start
// removes it again — nothing can have been written to it but the broker's
// own bookkeeping, since no listener accepted a connection.

// newDataDir is the outermost of dir and its parents that does not exist
// yet ("" when dir exists, or cannot be checked).
func newDataDir(dir string) string {
	dir = filepath.Clean(dir)
	created := ""
	for {
		if _, err := os.Stat(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
			return created
		}
		created = dir
		parent := filepath.Dir(dir)
		if parent == dir {
			return created
		}
		dir = parent
	}
}

// discardNewDataDir closes the built-in broker and removes the data
// directory Open created for it, after a failed start.
func (g *Gateway) discardNewDataDir() {
	if g.newDataDir == "" {
		return
	}
	g.closeBackend()
	if err := os.RemoveAll(g.newDataDir); err != nil {
		g.log.Warn("remove the data directory of a failed start", "dir", g.newDataDir, "err", err)
	}
	g.newDataDir = ""
}
