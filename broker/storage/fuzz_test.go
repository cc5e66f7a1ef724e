package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecover appends arbitrary bytes to a segment holding valid batches,
// as a torn or corrupted tail, and opens the log. Invariants: OpenLog never
// panics or fails; every valid batch written before the tail is kept, byte
// for byte; whatever recovery keeps beyond it is valid, contiguous batches;
// and the log takes appends afterwards.
func FuzzRecover(f *testing.F) {
	valid := makeBatch(f, dataSpec(3))
	f.Add([]byte{})
	f.Add(valid[:30])
	f.Add(make([]byte, 100))
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		l, err := OpenLog(dir, smallConfig(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, _, err := l.Append(makeBatch(t, dataSpec(2)), AppendOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		prefix := readAll(t, l, 0)
		crash(l)
		seg := filepath.Join(dir, "00000000000000000000.log")
		fh, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.Write(tail)
		fh.Close()
		l, err = OpenLog(dir, smallConfig(), nil)
		if err != nil {
			t.Fatalf("recovery failed: %v", err)
		}
		defer l.Close()
		got := readAll(t, l, 0)
		if !bytes.HasPrefix(got, prefix) {
			t.Fatal("recovery lost the valid prefix")
		}
		batchesOf(t, got)
		if _, _, err := l.Append(makeBatch(t, dataSpec(1)), AppendOptions{}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}
