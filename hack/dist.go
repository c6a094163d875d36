//go:build ignore

// Command dist is hack/dist.sh's helper: reproducible release archives and the
// krew manifest, with the standard library only (no zip, tar or sha256sum
// flavours to depend on).
//
//	go run hack/dist.go archive -o dist/X.tar.gz -mtime UNIX FILE...   (.tar.gz or .zip)
//	go run hack/dist.go manifest -template T -o krew-manifest.yaml -version V -commit C [-completion] OS/ARCH=ARCHIVE...
//
// Archives hold each FILE at the top level under its base name, sorted, owned
// by root, with the given modification time and mode 0755 (executable source)
// or 0644, so the same inputs give the same bytes.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"text/template"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dist archive|manifest [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "archive":
		err = archive(os.Args[2:])
	case "manifest":
		err = manifest(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q (want archive or manifest)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error: dist:", err)
		os.Exit(1)
	}
}

type entry struct {
	name string
	mode int64
	data []byte
}

func archive(args []string) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	out := fs.String("o", "", "archive to write (.tar.gz or .zip)")
	mtime := fs.Int64("mtime", 0, "modification time of every entry (unix seconds)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return fmt.Errorf("archive needs -o and at least one file")
	}
	var entries []entry
	for _, p := range fs.Args() {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if st.Mode()&0o111 != 0 {
			mode = 0o755
		}
		entries = append(entries, entry{name: filepath.Base(p), mode: mode, data: data})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	mod := time.Unix(*mtime, 0).UTC()

	var buf bytes.Buffer
	switch {
	case strings.HasSuffix(*out, ".tar.gz"):
		gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return err
		}
		tw := tar.NewWriter(gz)
		for _, e := range entries {
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)),
				ModTime: mod, Uname: "root", Gname: "root", Format: tar.FormatUSTAR}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
	case strings.HasSuffix(*out, ".zip"):
		zw := zip.NewWriter(&buf)
		for _, e := range entries {
			hdr := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: mod}
			hdr.SetMode(os.FileMode(e.mode))
			w, err := zw.CreateHeader(hdr)
			if err != nil {
				return err
			}
			if _, err := w.Write(e.data); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%s: want a .tar.gz or .zip name", *out)
	}
	return writeFile(*out, buf.Bytes())
}

// Platform is one os/arch entry of the krew manifest.
type Platform struct {
	OS, Arch, Archive, Sha256, Bin string
}

func manifest(args []string) error {
	fs := flag.NewFlagSet("manifest", flag.ContinueOnError)
	tmplPath := fs.String("template", "", "text/template of the manifest")
	out := fs.String("o", "", "manifest to write")
	version := fs.String("version", "", "plugin version (semver, v-prefixed)")
	commit := fs.String("commit", "unknown", "the commit stamped into the binaries")
	completion := fs.Bool("completion", false, "the archives hold kubectl_complete-gobrave")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tmplPath == "" || *out == "" || *version == "" || fs.NArg() == 0 {
		return fmt.Errorf("manifest needs -template, -o, -version and at least one OS/ARCH=ARCHIVE")
	}
	var platforms []Platform
	for _, a := range fs.Args() {
		osArch, path, ok := strings.Cut(a, "=")
		goos, goarch, ok2 := strings.Cut(osArch, "/")
		if !ok || !ok2 {
			return fmt.Errorf("%q: want OS/ARCH=ARCHIVE", a)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		bin := "kubectl-gobrave"
		if goos == "windows" {
			bin += ".exe"
		}
		platforms = append(platforms, Platform{OS: goos, Arch: goarch, Archive: filepath.Base(path),
			Sha256: hex.EncodeToString(sum[:]), Bin: bin})
	}
	t, err := template.New(filepath.Base(*tmplPath)).Option("missingkey=error").ParseFiles(*tmplPath)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	data := struct {
		Version, Commit, GoVersion string
		Completion                 bool
		Platforms                  []Platform
	}{*version, *commit, runtime.Version(), *completion, platforms}
	if err := t.Execute(&buf, data); err != nil {
		return err
	}
	return writeFile(*out, buf.Bytes())
}

// writeFile replaces path atomically, so a failed run never leaves half a file.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, bytes.NewReader(data)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
