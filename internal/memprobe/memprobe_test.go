//go:build linux

package memprobe

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStatusFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "status")
	if err := os.WriteFile(p, []byte("Name:\tkubectl-gobrave\nVmHWM:\t   71764 kB\nRssAnon:\t   29000 kB\nThreads:\t12\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := StatusFile(p)
	if got["VmHWM"] != 71764 || got["RssAnon"] != 29000 || len(got) != 2 {
		t.Errorf("StatusFile = %v, want VmHWM 71764 and RssAnon 29000 only (kB fields)", got)
	}
	if StatusFile(filepath.Join(t.TempDir(), "gone")) != nil {
		t.Error("StatusFile of a process gone: want nil")
	}
	if st := Status(os.Getpid()); st["VmHWM"] <= 0 {
		t.Errorf("Status(self) = %v, want a VmHWM", st)
	}
}
