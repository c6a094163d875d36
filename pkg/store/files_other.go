//go:build !unix

package store

import "io/fs"

// hasOwners: Windows files have ACLs, not owners and permission bits that
// os.FileMode reports; CheckFiles judges nothing there.
const hasOwners = false

const noFollow = 0

func fileOwner(fs.FileInfo) (int, bool) { return -1, false }
