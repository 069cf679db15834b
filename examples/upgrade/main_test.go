package main

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseFlags(t *testing.T) {
	tests := map[string]struct {
		args    []string
		want    options
		wantErr string
	}{
		"no flags run on the fake cluster": {},
		"-legacy compares on the fake cluster": {
			args: []string{"-legacy"},
			want: options{legacy: true},
		},
		"-live uses the standard loading rules": {
			args: []string{"-live"},
			want: options{live: true},
		},
		"-kubeconfig implies -live": {
			args: []string{"-kubeconfig", "/tmp/k"},
			want: options{live: true, target: target{Kubeconfig: "/tmp/k"}},
		},
		"--context implies -live": {
			args: []string{"--context", "kind-demo"},
			want: options{live: true, target: target{Context: "kind-demo"}},
		},
		"-legacy is refused on a real cluster": {
			args:    []string{"-legacy", "-context", "kind-demo"},
			wantErr: "-legacy runs only on the fake cluster",
		},
		"arguments are refused": {
			args:    []string{"-live", "kind-demo"},
			wantErr: "unexpected arguments",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseFlags(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(options{})); diff != "" {
				t.Errorf("parseFlags(%q) (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}
