package proxy

import (
	"errors"
	"testing"

	"github.com/tollgate-kafka/tollgate/apis"
	"github.com/tollgate-kafka/tollgate/wire"
)

// FuzzRequestSize: the per-API size check never panics (apiName on any
// key), lets every Produce through and every frame within the limit, and
// refuses the rest with wire.ErrFrameTooLarge.
func FuzzRequestSize(f *testing.F) {
	f.Add(int16(3), 100<<20, 8<<20)
	f.Add(int16(0), 100<<20, 8<<20)
	f.Add(int16(-1), 9<<20, 8<<20)
	f.Add(int16(32767), 1, 1)
	f.Fuzz(func(t *testing.T, key int16, size, limit int) {
		err := requestSizeErr(key, size, limit)
		switch {
		case key == apis.Produce || size <= limit:
			if err != nil {
				t.Fatalf("key %d size %d limit %d refused: %v", key, size, limit, err)
			}
		case !errors.Is(err, wire.ErrFrameTooLarge):
			t.Fatalf("key %d size %d limit %d: %v", key, size, limit, err)
		}
	})
}
