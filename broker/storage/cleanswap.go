package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The crash-safe swap of cleaned segments (Kafka renames .cleaned to
// .swap files; this keeps one manifest instead):
//
//  1. Each cleaned segment is written to <base>.log.cleaned (with
//     .index.cleaned and .timeindex.cleaned), fsynced, and the directory
//     fsynced.
//  2. The swap manifest (cleaner-swap) is written atomically: it names,
//     per cleaned segment, its base and the old segments it replaces, plus
//     the new first dirty offset. Once it exists the swap is decided.
//  3. Each .cleaned file is renamed over <base>.<ext>, the other old
//     segments' files are removed, and the directory is fsynced.
//  4. The cleaner-offset file takes the new first dirty offset and the
//     manifest is removed.
//
// Recovery (recoverSwap, before the segments are listed) redoes 3 and 4
// when a manifest exists -- every step is idempotent -- and otherwise
// removes any .cleaned file: a SIGKILL before 2 leaves the old segments,
// after it the new ones. Readers of the old segments keep their open
// descriptors (rename and unlink do not touch an open file).

const (
	swapFile        = "cleaner-swap"
	cleanerOffFile  = "cleaner-offset"
	cleanedSuffix   = ".cleaned"
	swapMagic       = "tollgate-cleaner-swap v1"
	cleanerOffMagic = "tollgate-cleaner-offset v1"
)

var segExts = []string{".log", ".index", ".timeindex"}

// swapGroup is one cleaned segment and the old segments it replaces.
type swapGroup struct {
	base    int64
	srcs    []*segment
	olds    []int64 // bases of srcs (set for recovery)
	seg     *segment
	swapped bool
}

func (g *swapGroup) oldBases() []int64 {
	if g.olds != nil {
		return g.olds
	}
	out := make([]int64, len(g.srcs))
	for i, s := range g.srcs {
		out[i] = s.base
	}
	return out
}

// swap replaces the groups' old segments with the cleaned ones, on disk
// and in memory. Retention and DeleteRecords wait for it (swapMu); if they
// removed a source segment meanwhile, the run is abandoned.
func (l *Log) swap(groups []*swapGroup, firstDirty, horizon int64, dropped map[int64]bool) error {
	l.swapMu.Lock()
	defer l.swapMu.Unlock()
	if err := l.checkSources(groups); err != nil {
		return err
	}
	if err := writeFileAtomic(l.dir, swapFile, encodeSwap(groups, firstDirty, horizon)); err != nil {
		return fmt.Errorf("write swap manifest: %w", err)
	}
	if err := l.hook("manifest"); err != nil {
		return err
	}
	if err := applySwap(l.dir, groups, l.hook); err != nil {
		err = fmt.Errorf("%w: a cleaned-segment swap failed half-way; reopen the log to finish it: %w", ErrStorage, err)
		l.mu.Lock()
		l.cleanBroken = err
		l.mu.Unlock()
		return err
	}
	l.swapInMemory(groups, firstDirty, horizon, dropped)
	if err := l.hook("swapped"); err != nil {
		return err
	}
	if err := writeCleanerOffset(l.dir, firstDirty, horizon); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(l.dir, swapFile)); err != nil {
		return fmt.Errorf("remove swap manifest: %w", err)
	}
	return syncDir(l.dir)
}

// checkSources verifies that the groups' sources are still the log's
// leading segments.
func (l *Log) checkSources(groups []*swapGroup) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return errCleanAbandoned
	}
	i := 0
	for _, g := range groups {
		for _, s := range g.srcs {
			if i >= len(l.segs)-1 || l.segs[i] != s || s.deleted {
				return errCleanAbandoned
			}
			i++
		}
	}
	return nil
}

// swapInMemory puts the cleaned segments in place of their sources. The
// sources close once the reads holding them finish.
func (l *Log) swapInMemory(groups []*swapGroup, firstDirty, horizon int64, dropped map[int64]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	var fresh []*segment
	for _, g := range groups {
		n += len(g.srcs)
		fresh = append(fresh, g.seg)
		g.swapped = true
		for _, s := range g.srcs {
			if l.hwSeg == s {
				l.hwSeg, l.hwPos = g.seg, g.seg.size
			}
			s.deleted = true
			s.unref()
		}
	}
	l.segs = append(fresh, l.segs[n:]...)
	l.firstDirty, l.horizonNext = firstDirty, horizon
	if len(dropped) > 0 {
		keep := l.ps.aborted[:0]
		for _, a := range l.ps.aborted {
			if !dropped[a.LastOffset] {
				keep = append(keep, a)
			}
		}
		l.ps.aborted = keep
	}
}

// applySwap renames the cleaned files into place and removes the
// replaced segments; running it again after a crash is harmless.
func applySwap(dir string, groups []*swapGroup, hook func(string) error) error {
	for _, g := range groups {
		for _, ext := range segExts {
			from := segName(dir, g.base, ext) + cleanedSuffix
			if err := os.Rename(from, segName(dir, g.base, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("swap in %s: %w", from, err)
			}
		}
		if err := hook("renamed"); err != nil {
			return err
		}
		for _, b := range g.oldBases() {
			if b == g.base {
				continue
			}
			if err := (&segment{base: b, dir: dir}).removeFiles(); err != nil {
				return err
			}
		}
	}
	return syncDir(dir)
}

// recoverSwap finishes a decided swap or discards an undecided one; it
// runs before recovery lists the segments.
func (l *Log) recoverSwap() error {
	b, err := os.ReadFile(filepath.Join(l.dir, swapFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return removeAllCleaned(l.dir)
	case err != nil:
		return fmt.Errorf("read swap manifest: %w", err)
	}
	groups, firstDirty, horizon, err := decodeSwap(b)
	if err != nil {
		return fmt.Errorf("swap manifest %s: %w", filepath.Join(l.dir, swapFile), err)
	}
	l.logger.Warn("finishing a log-cleaner swap interrupted by a crash", "segments", len(groups))
	if err := applySwap(l.dir, groups, func(string) error { return nil }); err != nil {
		return err
	}
	if err := writeCleanerOffset(l.dir, firstDirty, horizon); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(l.dir, swapFile)); err != nil {
		return fmt.Errorf("remove swap manifest: %w", err)
	}
	return syncDir(l.dir)
}

func removeCleaned(dir string, base int64) {
	for _, ext := range segExts {
		os.Remove(segName(dir, base, ext) + cleanedSuffix)
	}
}

func removeAllCleaned(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), cleanedSuffix) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove half-cleaned segment: %w", err)
			}
		}
	}
	return nil
}

// Manifest: magic line, "firstDirty horizon", then one line per group:
// "base old1 old2 ...".
func encodeSwap(groups []*swapGroup, firstDirty, horizon int64) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n%d %d\n", swapMagic, firstDirty, horizon)
	for _, g := range groups {
		sb.WriteString(strconv.FormatInt(g.base, 10))
		for _, b := range g.oldBases() {
			sb.WriteString(" " + strconv.FormatInt(b, 10))
		}
		sb.WriteString("\n")
	}
	return []byte(sb.String())
}

func decodeSwap(b []byte) ([]*swapGroup, int64, int64, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 3 || lines[0] != swapMagic {
		return nil, 0, 0, errors.New("unrecognised file")
	}
	nums, err := parseInts(lines[1])
	if err != nil || len(nums) != 2 {
		return nil, 0, 0, fmt.Errorf("bad offsets line %q", lines[1])
	}
	var groups []*swapGroup
	for _, ln := range lines[2:] {
		v, err := parseInts(ln)
		if err != nil || len(v) < 2 || v[0] != v[1] {
			return nil, 0, 0, fmt.Errorf("bad group line %q", ln)
		}
		groups = append(groups, &swapGroup{base: v[0], olds: v[1:]})
	}
	return groups, nums[0], nums[1], nil
}

func parseInts(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func writeCleanerOffset(dir string, firstDirty, horizon int64) error {
	body := fmt.Sprintf("%s\n%d %d\n", cleanerOffMagic, firstDirty, horizon)
	if err := writeFileAtomic(dir, cleanerOffFile, []byte(body)); err != nil {
		return fmt.Errorf("write cleaner offset: %w", err)
	}
	return nil
}

// readCleanerOffset returns the first dirty offset and the next delete
// horizon (0, 0 without a file).
func readCleanerOffset(dir string) (int64, int64, error) {
	b, err := os.ReadFile(filepath.Join(dir, cleanerOffFile))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read cleaner offset: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != cleanerOffMagic {
		return 0, 0, fmt.Errorf("read cleaner offset: unrecognised file %q", b)
	}
	v, err := parseInts(lines[1])
	if err != nil || len(v) != 2 {
		return 0, 0, fmt.Errorf("read cleaner offset: bad line %q", lines[1])
	}
	return v[0], v[1], nil
}
