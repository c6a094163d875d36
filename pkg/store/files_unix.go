//go:build unix

package store

import (
	"io/fs"
	"syscall"
)

// hasOwners: files have owners and permission bits here.
const hasOwners = true

// noFollow makes open fail on a symbolic link at the last component.
const noFollow = syscall.O_NOFOLLOW

// fileOwner is the uid owning the file.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, false
	}
	return int(st.Uid), true
}
