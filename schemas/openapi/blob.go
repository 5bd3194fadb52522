package openapi

import (
	"bytes"
	"compress/gzip"
	"sync"
)

// blob is a response body and, computed on first use, its gzip encoding.
type blob struct {
	raw  []byte
	once sync.Once
	gz   []byte
}

func newBlob(raw []byte) *blob { return &blob{raw: raw} }

// gzipped returns the gzip encoding of the body, or nil if compressing
// failed (the caller then sends the body as is).
func (b *blob) gzipped() []byte {
	b.once.Do(func() {
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		if err != nil {
			return
		}
		if _, err := zw.Write(b.raw); err != nil {
			return
		}
		if zw.Close() == nil {
			b.gz = buf.Bytes()
		}
	})
	return b.gz
}

// lazyProto is the gnostic protobuf form of a JSON document, converted on
// first request: few clients ask for it and the conversion is the slow
// part of building the documents.
type lazyProto struct {
	once    sync.Once
	json    []byte
	convert func([]byte) ([]byte, error)
	b       *blob
	err     error
}

func (l *lazyProto) get() (*blob, error) {
	l.once.Do(func() {
		pb, err := l.convert(l.json)
		if err != nil {
			l.err = err
			return
		}
		l.b = newBlob(pb)
	})
	return l.b, l.err
}
