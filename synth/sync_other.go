//go:build !linux

package synth

import (
	"io/fs"
	"os"
	"path/filepath"
)

// syncTree makes every file written under dir durable by syncing each file
// and directory in it.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
