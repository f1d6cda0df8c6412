package atomicfile

import (
	"context"
	"fmt"
	"io"
)

// Batch writes several files that are published together: each is
// written in full to its temporary file by Add, and none replaces its
// destination before Commit. A failed or abandoned batch (Abort) leaves
// every destination as it was. The zero Batch is ready to use.
type Batch struct {
	files []*File
}

// Add writes path's new content with write, to a temporary file beside
// it, and closes (syncs) it. It checks ctx first and returns an error
// wrapping ctx's error once ctx is cancelled.
func (b *Batch) Add(ctx context.Context, path string, write func(w io.Writer) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := Create(path)
	if err != nil {
		return err
	}
	b.files = append(b.files, f)
	if err := write(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// Commit renames every file added into place, in the order added. A
// rename that fails stops it: the files before it are in place, the rest
// are not (Abort removes their temporary files).
func (b *Batch) Commit() error {
	for _, f := range b.files {
		if err := f.Commit(); err != nil {
			return err
		}
	}
	b.files = nil
	return nil
}

// Abort removes the temporary files of the files not yet committed.
func (b *Batch) Abort() {
	for _, f := range b.files {
		f.Abort()
	}
	b.files = nil
}
