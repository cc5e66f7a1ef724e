//go:build unix

package proxy

import "syscall"

const mapsFrames = true

// mapFrame returns size bytes of private anonymous memory, or nil if the
// mapping failed (the caller falls back to the heap).
func mapFrame(size int) []byte {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return b
}

// unmapFrame returns mem, a whole mapFrame result, to the system.
func unmapFrame(mem []byte) { _ = syscall.Munmap(mem) }
