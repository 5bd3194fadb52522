package storage

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/events"
)

// Snapshot lists every key under each prefix, page by page, all at one
// revision (the current one when the first page is read), which it
// returns: what an in-memory cache that then follows the log from that
// revision loads first. out[i] holds the keys under prefixes[i].
func (s *Store) Snapshot(ctx context.Context, prefixes ...string) (out [][]KV, rev events.Revision, err error) {
	out = make([][]KV, len(prefixes))
	for i, prefix := range prefixes {
		opts := ListOptions{Limit: 500, Revision: rev}
		for {
			page, err := s.List(ctx, prefix, opts)
			if err != nil {
				return nil, 0, fmt.Errorf("storage: snapshot %s: %w", prefix, err)
			}
			rev, opts.Revision = page.Revision, page.Revision
			out[i] = append(out[i], page.Items...)
			if page.NextKey == "" {
				break
			}
			opts.StartKey = page.NextKey
		}
	}
	return out, rev, nil
}
