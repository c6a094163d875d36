package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrUnsafe is wrapped when the state database, its -wal or -shm file or its
// folder could be changed by another user: a symbolic link, group- or
// world-writable, or owned by another user. The file is refused, not used.
var ErrUnsafe = errors.New("state database is not private")

// Finding is what CheckFiles found about one file of the state database.
type Finding struct {
	// Path is the file or folder judged.
	Path string
	// Problem says what is wrong; "" when nothing is.
	Problem string
	// Unsafe is true when another user could change the file: Open refuses it.
	// False for a problem that only lets others read it.
	Unsafe bool
	// Fix is the command that fixes the problem.
	Fix string
}

// CheckFiles judges the files of the state database at path, in the order
// folder, database, -wal, -shm: each must be a regular file (not a symbolic
// link) owned by this user, writable by no one else; the folder, followed
// through links above it, must be owned by this user or root and writable by
// no one else, since whoever can write to it can replace the files in it
// (which is also why checking the files with Lstat before SQLite opens them
// is enough: no one else can swap them afterwards). A file that others can
// read is a problem that is not unsafe; a folder others can read is not a
// problem: the database's own mode keeps its content private. Missing files
// are fine (they are created 0600). Nothing is checked where the platform has
// no owners and modes (Windows).
func CheckFiles(path string) []Finding {
	if !hasOwners {
		return nil
	}
	dir := filepath.Dir(path)
	var out []Finding
	if fi, err := os.Stat(dir); err == nil {
		f := Finding{Path: dir}
		uid, _ := fileOwner(fi)
		switch {
		case uid != os.Geteuid() && uid != 0:
			f.Problem, f.Unsafe = fmt.Sprintf("folder %s is owned by uid %d, not by you (uid %d): that user can replace the database", dir, uid, os.Geteuid()), true
			f.Fix = "point --state-db or GOBRAVE_HOME at a folder of your own"
		case fi.Mode().Perm()&0o022 != 0:
			f.Problem, f.Unsafe = fmt.Sprintf("folder %s is %v: other users can replace the database in it", dir, fi.Mode().Perm()), true
			f.Fix = "chmod 700 " + shellQuote(dir)
		}
		out = append(out, f)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Lstat(p)
		if err != nil {
			continue // missing (or unreadable: opening it will say so)
		}
		out = append(out, judgeFile(p, fi))
	}
	return out
}

// judgeFile judges one of the database's files from its Lstat (or Fstat).
func judgeFile(p string, fi fs.FileInfo) Finding {
	f := Finding{Path: p}
	uid, _ := fileOwner(fi)
	perm := fi.Mode().Perm()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := os.Readlink(p)
		f.Problem, f.Unsafe = fmt.Sprintf("%s is a symbolic link (to %s): the state database is not followed through links", p, target), true
		f.Fix = "replace the link by the file, or point --state-db at the file itself"
	case !fi.Mode().IsRegular():
		f.Problem, f.Unsafe = fmt.Sprintf("%s is not a regular file (%v)", p, fi.Mode().Type()), true
		f.Fix = "move it aside or point --state-db elsewhere"
	case uid != os.Geteuid():
		f.Problem, f.Unsafe = fmt.Sprintf("%s is owned by uid %d, not by you (uid %d)", p, uid, os.Geteuid()), true
		f.Fix = "move it aside (that user can change your records) or point --state-db elsewhere"
	case perm&0o022 != 0:
		f.Problem, f.Unsafe = fmt.Sprintf("%s is %v: other users can change your records", p, perm), true
		f.Fix = "chmod 600 " + shellQuote(p)
	case perm&0o044 != 0:
		f.Problem = fmt.Sprintf("%s is %v: other users can read your workloads' specs", p, perm)
		f.Fix = "chmod 600 " + shellQuote(p)
	}
	return f
}

// unsafeError is the first unsafe finding as the error Open returns.
func unsafeError(fs []Finding) error {
	for _, f := range fs {
		if f.Unsafe {
			return &dbError{is: ErrUnsafe, msg: fmt.Sprintf("refusing the state database: %s (fix: %s)", f.Problem, f.Fix)}
		}
	}
	return nil
}

// shellQuote quotes p for a shell when it needs it.
func shellQuote(p string) string {
	if p != "" && strings.IndexFunc(p, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ',' || r == ':' || r == '@' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}
