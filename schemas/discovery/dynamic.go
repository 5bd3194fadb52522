package discovery

import (
	"net/http"
	"sync"

	"github.com/cairn-dev/cairn/schemas"
)

// Dynamic serves discovery for a set of resources that changes at run
// time (custom resources joining and leaving the registry): all lists
// them, generation counts the changes (schemas.Registry.Generation). The
// documents are rebuilt, once, on the first request after a change; it
// is safe for concurrent use.
func Dynamic(all func() []*schemas.Resource, generation func() uint64) http.Handler {
	return &dynamic{all: all, generation: generation}
}

type dynamic struct {
	all        func() []*schemas.Resource
	generation func() uint64

	mu  sync.Mutex
	gen uint64
	h   http.Handler
}

func (d *dynamic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.current().ServeHTTP(w, r)
}

func (d *dynamic) current() http.Handler {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen := d.generation(); d.h == nil || gen != d.gen {
		// The generation is read before the resources: a change between
		// the two only causes one more rebuild.
		d.gen, d.h = gen, Handler(d.all())
	}
	return d.h
}
