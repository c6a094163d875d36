//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is the uid "another user" gets in these tests (the tests run as
// root in CI, which may chown).
const nobody = 65534

func TestOpenRefusesFilesOthersCanChange(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the folder dir that will hold dir/state.db.
		setup   func(t *testing.T, dir string)
		root    bool // needs to chown
		wantErr string
		wantFix string
	}{
		{name: "new database in a private folder"},
		{name: "folder 0755 around a 0600 database", setup: func(t *testing.T, dir string) {
			chmod(t, dir, 0o755)
			createDB(t, dir, 0o600)
		}},
		{name: "database readable by others is used", setup: func(t *testing.T, dir string) { createDB(t, dir, 0o644) }},
		{name: "world-writable database", setup: func(t *testing.T, dir string) { createDB(t, dir, 0o666) },
			wantErr: "state.db is -rw-rw-rw-: other users can change your records", wantFix: "chmod 600 "},
		{name: "group-writable database", setup: func(t *testing.T, dir string) { createDB(t, dir, 0o620) },
			wantErr: "state.db is -rw--w----", wantFix: "chmod 600 "},
		{name: "world-writable -wal", setup: func(t *testing.T, dir string) {
			createDB(t, dir, 0o600)
			writeFile(t, filepath.Join(dir, "state.db-wal"), 0o606)
		}, wantErr: "state.db-wal is -rw----rw-", wantFix: "chmod 600 "},
		{name: "-shm of another user", root: true, setup: func(t *testing.T, dir string) {
			createDB(t, dir, 0o600)
			p := filepath.Join(dir, "state.db-shm")
			writeFile(t, p, 0o600)
			chown(t, p, nobody)
		}, wantErr: "state.db-shm is owned by uid 65534", wantFix: "move it aside"},
		{name: "database of another user", root: true, setup: func(t *testing.T, dir string) {
			createDB(t, dir, 0o600)
			chown(t, filepath.Join(dir, "state.db"), nobody)
		}, wantErr: "state.db is owned by uid 65534", wantFix: "move it aside"},
		{name: "world-writable folder", setup: func(t *testing.T, dir string) { chmod(t, dir, 0o777) },
			wantErr: "is -rwxrwxrwx: other users can replace the database in it", wantFix: "chmod 700 "},
		{name: "sticky world-writable folder, like /tmp", setup: func(t *testing.T, dir string) { chmod(t, dir, 0o1777) },
			wantErr: "other users can replace the database in it", wantFix: "chmod 700 "},
		{name: "folder of another user", root: true, setup: func(t *testing.T, dir string) { chown(t, dir, nobody) },
			wantErr: "is owned by uid 65534, not by you", wantFix: "a folder of your own"},
		{name: "database is a symbolic link", setup: func(t *testing.T, dir string) {
			target := filepath.Join(t.TempDir(), "elsewhere.db")
			writeFile(t, target, 0o600)
			symlink(t, target, filepath.Join(dir, "state.db"))
		}, wantErr: "state.db is a symbolic link", wantFix: "point --state-db at the file itself"},
		{name: "database is a dangling symbolic link", setup: func(t *testing.T, dir string) {
			symlink(t, filepath.Join(t.TempDir(), "planted.db"), filepath.Join(dir, "state.db"))
		}, wantErr: "state.db is a symbolic link", wantFix: "replace the link"},
		{name: "-wal is a symbolic link", setup: func(t *testing.T, dir string) {
			createDB(t, dir, 0o600)
			symlink(t, "/dev/null", filepath.Join(dir, "state.db-wal"))
		}, wantErr: "state.db-wal is a symbolic link (to /dev/null)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			dir := filepath.Join(t.TempDir(), "gobrave")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			path := filepath.Join(dir, "state.db")
			before := snapshot(t, dir)
			s, err := Open(t.Context(), path)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatalf("Open succeeded, want an error containing %q", tt.wantErr)
			}
			msg := err.Error()
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(msg, tt.wantErr) || !strings.Contains(msg, tt.wantFix) ||
				strings.Contains(msg, "\n") {
				t.Errorf("Open: %q (ErrUnsafe %v), want one line with %q and the fix %q", msg, errors.Is(err, ErrUnsafe), tt.wantErr, tt.wantFix)
			}
			if !strings.Contains(msg, dir) {
				t.Errorf("Open: %q does not name the file or folder in %s", msg, dir)
			}
			if after := snapshot(t, dir); after != before {
				t.Errorf("a refused Open changed the folder:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// precheck opens with O_NOFOLLOW: a link put in place after CheckFiles ran
// is refused too, and nothing is created at its target.
func TestPrecheckDoesNotFollowLinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "planted.db")
	link := filepath.Join(dir, "state.db")
	symlink(t, target, link)
	err := precheck(link)
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("precheck(link) = %v, want a refusal naming the link", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("precheck created the link's target: %v", err)
	}
}

func TestCheckFilesReadableFileIsNotUnsafe(t *testing.T) {
	dir := t.TempDir()
	createDB(t, dir, 0o640)
	fs := CheckFiles(filepath.Join(dir, "state.db"))
	if len(fs) != 2 || fs[0].Problem != "" || fs[1].Unsafe || !strings.Contains(fs[1].Problem, "other users can read") {
		t.Errorf("findings %+v, want the folder fine and the database readable, not unsafe", fs)
	}
}

func createDB(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	path := filepath.Join(dir, "state.db")
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	chmod(t, path, mode)
}

func writeFile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	chmod(t, path, mode)
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// snapshot lists the folder's entries with their modes and sizes.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %v %d; ", e.Name(), fi.Mode(), fi.Size())
	}
	return b.String()
}

// BenchmarkCheckFiles: what the checks add to every Open (four stats).
func BenchmarkCheckFiles(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(b.Context(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := unsafeError(CheckFiles(filepath.Join(dir, "state.db"))); err != nil {
			b.Fatal(err)
		}
	}
}
