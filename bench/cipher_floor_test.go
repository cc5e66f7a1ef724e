package bench

import (
	"crypto/aes"
	"crypto/cipher"
	"testing"
)

// BenchmarkAESGCM measures the cipher TLS 1.3 negotiates in the tls suite
// (TLS_AES_128_GCM_SHA256) on full 16 KiB records: the floor of what TLS
// adds per MB, once for the sender's Seal and once for the receiver's
// Open. The README's TLS section weighs the suite's ratios against it.
//
//	go test ./bench -run '^$' -bench AESGCM
func BenchmarkAESGCM(b *testing.B) {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	nonce := make([]byte, gcm.NonceSize())
	plain := make([]byte, 16<<10)
	sealed := gcm.Seal(nil, nonce, plain, nil)
	out := make([]byte, 0, len(sealed))
	b.Run("Seal", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			out = gcm.Seal(out[:0], nonce, plain, nil)
		}
	})
	b.Run("Open", func(b *testing.B) {
		b.SetBytes(int64(len(plain)))
		for b.Loop() {
			if out, err = gcm.Open(out[:0], nonce, sealed, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
