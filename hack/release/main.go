// Command release lays out the library's released versions as a module
// proxy in a directory, exactly as the go command expects one
// (<module>/@v/list, <version>.info, .mod and .zip), made from the commit
// each release records, so that an importer's go.mod can require a
// released version and its go.sum hold that version's hashes although
// the module is on no public proxy. A file:// GOPROXY entry in front of
// the usual one then serves it:
//
//	go run . -repo ../.. -out /tmp/proxy
//	GOPROXY=file:///tmp/proxy,$(go env GOPROXY) GONOSUMDB=github.com/kube-handoff/handoff go get github.com/kube-handoff/handoff@v0.2.1
//
// The releases are the lines of the versions file: a version, the commit
// it was made from, and the go.sum hashes of its zip and its go.mod. The
// zip is made from the commit by golang.org/x/mod/zip as the go command
// makes it from a VCS, so any later checkout makes it again; the command
// fails when a hash it computes is not the one recorded, which would make
// every importer's go.sum line false.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// release is one line of the versions file.
type release struct {
	Version, Commit, ZipHash, ModHash string
}

func main() {
	repo := flag.String("repo", ".", "the library's git repository")
	out := flag.String("out", "", "the directory to lay the proxy out in (required)")
	versions := flag.String("versions", "", "the versions file (default: hack/release/versions in the repository)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "release: -out is required")
		os.Exit(2)
	}
	if *versions == "" {
		*versions = filepath.Join(*repo, "hack", "release", "versions")
	}
	if err := run(*repo, *out, *versions); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(repo, out, versionsFile string) error {
	rels, err := readVersions(versionsFile)
	if err != nil {
		return err
	}
	var errs []error
	byModule := map[string][]string{}
	for _, r := range rels {
		path, err := layOut(repo, out, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s (commit %s): %w", r.Version, r.Commit, err))
			continue
		}
		byModule[path] = append(byModule[path], r.Version)
		fmt.Printf("%s@%s from %s: %s, go.mod %s\n", path, r.Version, r.Commit[:12], r.ZipHash, r.ModHash)
	}
	for path, vs := range byModule {
		dir, err := escapedDir(out, path)
		if err != nil {
			return err
		}
		semver.Sort(vs)
		if err := os.WriteFile(filepath.Join(dir, "list"), []byte(strings.Join(vs, "\n")+"\n"), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// readVersions reads the versions file: one release a line, blank lines
// and lines starting with # left out.
func readVersions(name string) ([]release, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rels []release
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 4 || !semver.IsValid(fields[0]) || len(fields[1]) != 40 {
			return nil, fmt.Errorf("%s:%d: want \"<version> <40-hex commit> <h1 hash of the zip> <h1 hash of go.mod>\", got %q", name, n, line)
		}
		rels = append(rels, release{Version: fields[0], Commit: fields[1], ZipHash: fields[2], ModHash: fields[3]})
	}
	return rels, sc.Err()
}

// layOut writes the .mod, .info and .zip of one release and checks their
// hashes against the recorded ones; it returns the module path.
func layOut(repo, out string, r release) (string, error) {
	gomod, err := git(repo, "show", r.Commit+":go.mod")
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", errors.New("go.mod names no module")
	}
	when, err := git(repo, "show", "-s", "--format=%cI", r.Commit)
	if err != nil {
		return "", err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(when)))
	if err != nil {
		return "", fmt.Errorf("commit time: %w", err)
	}
	dir, err := escapedDir(out, path)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ev, err := module.EscapeVersion(r.Version)
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, ev)
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{r.Version, t.UTC()})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".info", info, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(base+".mod", gomod, 0o644); err != nil {
		return "", err
	}
	zf, err := os.Create(base + ".zip")
	if err != nil {
		return "", err
	}
	root, err := git(repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return "", err
	}
	err = zip.CreateFromVCS(zf, module.Version{Path: path, Version: r.Version}, strings.TrimSpace(string(root)), r.Commit, "")
	if cerr := zf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("zip: %w", err)
	}
	zipHash, err := dirhash.HashZip(base+".zip", dirhash.Hash1)
	if err != nil {
		return "", err
	}
	modHash, err := dirhash.Hash1([]string{"go.mod"}, func(string) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gomod)), nil
	})
	if err != nil {
		return "", err
	}
	var errs []error
	if zipHash != r.ZipHash {
		errs = append(errs, fmt.Errorf("the zip's hash is %s, the versions file records %s", zipHash, r.ZipHash))
	}
	if modHash != r.ModHash {
		errs = append(errs, fmt.Errorf("go.mod's hash is %s, the versions file records %s", modHash, r.ModHash))
	}
	return path, errors.Join(errs...)
}

// escapedDir is the proxy directory of a module's versions.
func escapedDir(out, path string) (string, error) {
	ep, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	return filepath.Join(out, filepath.FromSlash(ep), "@v"), nil
}

func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return b, nil
}
