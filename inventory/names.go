package inventory

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kube-handoff/handoff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotations that keep a name the labels could not hold as it was.
const (
	// ComponentNameAnnotation holds Inventory.Component on each
	// ConfigMap when it is no label value (see [Inventory.Component]).
	ComponentNameAnnotation = "handoff.kube-handoff.io/component-name"
	// GenerationNameAnnotation holds the generation's name on each
	// ConfigMap when it is no label value (see [Inventory.Generation]).
	GenerationNameAnnotation = "handoff.kube-handoff.io/generation-name"
)

// keptChars is how much of a name a hashed form keeps: with "-" and 10 hex
// digits it makes 63, the longest label value.
const keptChars = 52

// LabelValue returns the label value that stands for s in an inventory's
// labels: s itself when it is a label value (at most 63 characters of
// [-_.a-zA-Z0-9], beginning and ending with a letter or digit); otherwise
// the first 52 of its characters that a label value may hold, the others
// turned into "-", then "-" and 10 hex digits of the SHA-256 of s. Two
// strings that differ anywhere get different values, and the same string
// the same value every time, so an operator may name its components and
// generations as it likes: "1.2.3+build.7" becomes
// "1.2.3-build.7-" followed by its hash.
func LabelValue(s string) string {
	if len(validation.IsValidLabelValue(s)) == 0 {
		return s
	}
	return hashed(s, s, labelRune)
}

// labelRune reports whether a label value may hold r.
func labelRune(r rune) bool {
	return r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}

// namePart returns what stands for the component in the names of its
// ConfigMaps: the component itself when it makes valid names, and
// otherwise a hashed form of lower-case letters, digits, "-" and ".".
func namePart(component string) string {
	longest := component + "-inventory-" + handoff.DroppedRolePrefix + "0123456789-0123456789"
	if len(validation.IsDNS1123Subdomain(longest)) == 0 {
		return component
	}
	return hashed(strings.ToLower(component), component, func(r rune) bool {
		return r == '-' || r == '.' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9'
	})
}

// hashed keeps the first keptChars characters of s, those ok refuses
// turned into "-", trims what cannot begin or end a name, and appends "-"
// and 10 hex digits of the SHA-256 of orig, the name s was made from.
func hashed(s, orig string, ok func(rune) bool) string {
	sum := sha256.Sum256([]byte(orig))
	h := hex.EncodeToString(sum[:5])
	kept := []rune(strings.Map(func(r rune) rune {
		if ok(r) {
			return r
		}
		return '-'
	}, s))
	if len(kept) > keptChars {
		kept = kept[:keptChars]
	}
	prefix := strings.Trim(string(kept), "-_.")
	if prefix == "" {
		return h
	}
	return prefix + "-" + h
}

// GenerationName names the generation of objs for an operator whose
// releases have a version but that may apply a release in more than one
// shape (another ingress, another target namespace, an extra manifest):
// the version, made a label value of at most 52 characters (the
// characters a label value cannot hold turned into "-"), then "-" and 10
// hex digits of the SHA-256 of the version and of each object's identity
// and API version. A change of what is applied is a new generation, handed
// off as an upgrade is; a change of content alone is not, and is updated
// in place. Objects listed twice are named once, as [Entries] records them;
// an object Entries refuses is its error.
func GenerationName(version string, objs []unstructured.Unstructured) (string, error) {
	entries, err := Entries(objs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(version)
	for _, e := range entries {
		fmt.Fprintf(&b, "\x00%s\x00%s", e.Key(), e.APIVersion)
	}
	return hashed(version, b.String(), labelRune), nil
}
