package main

import (
	"archive/zip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sh runs a command in dir and returns its output, failing the test on an error.
func sh(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// A release laid out from a commit is what the go command downloads and
// hashes alike: the hashes the versions file must record are the go
// command's own, and a wrong one fails the run. A nested module stays out
// of the zip, as it does when the go command zips a VCS checkout.
func TestReleaseIsWhatTheGoCommandDownloads(t *testing.T) {
	repo := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/lib\n\ngo 1.22\n")
	write("lib.go", "package lib\n\nconst X = 1\n")
	write("nested/go.mod", "module example.com/lib/nested\n\ngo 1.22\n")
	write("nested/n.go", "package nested\n")
	gitEnv := []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
	sh(t, repo, gitEnv, "git", "init", "-q")
	sh(t, repo, gitEnv, "git", "add", ".")
	sh(t, repo, gitEnv, "git", "commit", "-q", "-m", "lib")
	commit := strings.TrimSpace(sh(t, repo, nil, "git", "rev-parse", "HEAD"))
	// A later commit changes the tree: the release is still made from its own.
	write("lib.go", "package lib\n\nconst X = 2\n")
	sh(t, repo, gitEnv, "git", "commit", "-q", "-am", "later")

	versions := filepath.Join(t.TempDir(), "versions")
	out := t.TempDir()
	if err := os.WriteFile(versions, []byte("# releases\nv0.1.0 "+commit+" h1:wrong h1:wrong\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(repo, out, versions); err == nil || !strings.Contains(err.Error(), "the versions file records h1:wrong") {
		t.Fatalf("run with wrong hashes: %v, want an error naming them", err)
	}

	imp := t.TempDir()
	if err := os.WriteFile(filepath.Join(imp, "go.mod"), []byte("module example.com/importer\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	modcache := t.TempDir()
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOMODCACHE=" + modcache, "GOPROXY=file://" + out + ",off", "GONOSUMDB=example.com/lib"}
	var dl struct{ Sum, GoModSum, Zip string }
	if err := json.Unmarshal([]byte(sh(t, imp, env, "go", "mod", "download", "-json", "example.com/lib@v0.1.0")), &dl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the module cache is read-only: the go command removes it
		clean := exec.Command("go", "clean", "-modcache")
		clean.Env = append(os.Environ(), "GOMODCACHE="+modcache)
		if out, err := clean.CombinedOutput(); err != nil {
			t.Errorf("go clean -modcache of the test's cache: %v\n%s", err, out)
		}
	})

	if err := os.WriteFile(versions, []byte("v0.1.0 "+commit+" "+dl.Sum+" "+dl.GoModSum+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := t.TempDir()
	if err := run(repo, good, versions); err != nil {
		t.Errorf("run with the go command's hashes: %v", err)
	}
	if list, err := os.ReadFile(filepath.Join(good, "example.com", "lib", "@v", "list")); err != nil || string(list) != "v0.1.0\n" {
		t.Errorf("the proxy's list is %q (%v), want the one version", list, err)
	}

	z, err := zip.OpenReader(dl.Zip)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
		if f.Name == "example.com/lib@v0.1.0/lib.go" {
			r, _ := f.Open()
			b := make([]byte, 64)
			n, _ := r.Read(b)
			r.Close()
			if !strings.Contains(string(b[:n]), "X = 1") {
				t.Errorf("lib.go in the zip is %q, want the released commit's", b[:n])
			}
		}
	}
	want := []string{"example.com/lib@v0.1.0/go.mod", "example.com/lib@v0.1.0/lib.go"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("zip holds %v, want %v", names, want)
	}
}
