package handoff

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fuzzBytes decodes fuzz input into choices. Once the input is exhausted
// every choice is zero, so any input decodes to a finite value.
type fuzzBytes struct {
	data []byte
}

func (b *fuzzBytes) byte() byte {
	if len(b.data) == 0 {
		return 0
	}
	c := b.data[0]
	b.data = b.data[1:]
	return c
}

func (b *fuzzBytes) intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(b.byte()) % n
}

func (b *fuzzBytes) bool() bool { return b.byte()&1 == 1 }

// pick returns one of alphabet, or (for the last choice) an arbitrary string
// taken from the input, possibly empty.
func (b *fuzzBytes) pick(alphabet ...string) string {
	i := b.intn(len(alphabet) + 1)
	if i < len(alphabet) {
		return alphabet[i]
	}
	n := b.intn(6)
	if n > len(b.data) {
		n = len(b.data)
	}
	s := string(b.data[:n])
	b.data = b.data[n:]
	return s
}

var fuzzSelector = map[string]string{"app": "comp", "type": "main"}

// fuzzInFamily is the family membership rule stated independently of
// Family.Contains: every selector label is present with its value.
func fuzzInFamily(sel, lbls map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		got, ok := lbls[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}

func (b *fuzzBytes) labels() map[string]string {
	switch b.intn(6) {
	case 0:
		return nil
	case 1:
		return map[string]string{"app": "comp"}
	case 2:
		return map[string]string{"app": "comp", "type": "other"}
	case 3:
		return map[string]string{"app": "comp", "type": "main", b.pick("x", "app"): b.pick("y", "comp")}
	default:
		return map[string]string{"app": "comp", "type": "main"}
	}
}

func (b *fuzzBytes) set() Set {
	s := Set{
		Name:         b.pick("a", "b", "c", ""),
		UID:          types.UID(b.pick("u1", "u2", "u3", "u4", "")),
		Generation:   b.pick("g1", "g2", "g3", ""),
		Role:         b.pick("static", "deploy", "extra", ""),
		Deleting:     b.intn(4) == 0,
		SupersededBy: b.pick("", "g1", "g2", "g3"),
		Hash:         b.pick("", "h1", "h2"),
		Labels:       b.labels(),
	}
	if c := b.intn(5); c > 0 {
		s.Created = time.Unix(int64(c), 0)
	}
	switch b.intn(4) {
	case 0:
		s.Readiness = Readiness{State: NotReady, Reason: "x"}
	case 1:
		s.Readiness = Readiness{State: Unknown}
	case 2:
		// zero value
	default:
		s.Readiness = Readiness{State: Ready}
	}
	return s
}

func (b *fuzzBytes) desired() *Desired {
	if b.intn(5) == 0 {
		return nil
	}
	d := &Desired{Generation: b.pick("g1", "g2", "g3", "")}
	n := b.intn(4)
	for range n {
		r := Role{Name: b.pick("static", "deploy", "extra", ""), Hash: b.pick("", "h1", "h2")}
		for range b.intn(3) {
			r.After = append(r.After, b.pick("static", "deploy", "extra", ""))
		}
		d.Roles = append(d.Roles, r)
	}
	return d
}

func fuzzSetLess(a, b Set) int {
	return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name), cmp.Compare(a.UID, b.UID))
}

func FuzzPlan(f *testing.F) {
	f.Add([]byte{}, uint8(0))
	f.Add([]byte("\x03\x00\x00\x00\x00\x01\x00\x00\x04\x03\x01\x00\x00\x00\x00\x01\x01\x01\x01\x02\x00\x01\x01\x02\x00\x05\x01\x01\x03\x03"), uint8(0))
	f.Add([]byte("\x04\x00\x00\x01\x00\x03\x00\x00\x04\x02\x03\x01\x01\x00\x01\x03\x00\x04\x03\x02\x02\x00\x00\x01\x01\x03\x01\x00\x02\x00\x00\x01\x00"), uint8(1))
	f.Add([]byte("\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02\x02"), uint8(0))
	f.Add([]byte("hello, fuzzing the planner with some arbitrary bytes \xff\xfe\x00\x01"), uint8(2))
	f.Add([]byte{5, 0, 0, 0, 0, 3, 0, 1, 4, 3, 3, 1, 1, 1, 1, 0, 3, 0, 4, 3, 3, 2, 2, 1, 1, 4, 3, 3, 1, 2, 2, 2, 0, 1, 2, 3, 4, 0, 1, 2, 3}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, mode uint8) {
		b := &fuzzBytes{data: data}
		sel := fuzzSelector
		if mode%16 == 15 {
			sel = nil
		}
		planner := Planner{Family: Family{Selector: sel}}
		for range b.intn(4) {
			planner.RoleOrder = append(planner.RoleOrder, b.pick("static", "deploy", "extra"))
		}
		var observed []Set
		for range b.intn(7) {
			observed = append(observed, b.set())
		}
		desired := b.desired()

		plan, err := planner.Plan(observed, desired)
		if err != nil {
			if plan.Generation != "" || plan.Phase != "" || plan.Actions != nil {
				t.Fatalf("error %v with non-zero plan %+v", err, plan)
			}
			if !errors.Is(err, ErrInvalidSet) && !errors.Is(err, ErrInvalidDesired) && !errors.Is(err, ErrInvalidFamily) {
				t.Fatalf("error %v wraps no sentinel", err)
			}
			return
		}

		// I4 containment.
		for _, a := range plan.Actions {
			if a.Set == "" {
				continue
			}
			found := false
			for _, s := range observed {
				if s.Name == a.Set && s.UID == a.UID && fuzzInFamily(sel, s.Labels) {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("I4: action %v names no observed set of the family\nobserved %+v\nplan %s", a, observed, plan)
			}
		}

		if desired == nil {
			for _, a := range plan.Actions {
				if a.Kind == ActionCreate || a.Kind == ActionUpdate {
					t.Fatalf("desired nil but plan has %v\n%s", a, plan)
				}
			}
			return
		}

		// I5 gating.
		roles := make(map[string]Role, len(desired.Roles))
		for _, r := range desired.Roles {
			roles[r.Name] = r
		}
		var members []Set
		for _, s := range observed {
			if fuzzInFamily(sel, s.Labels) {
				members = append(members, s)
			}
		}
		oldRetired := false
		for _, a := range plan.Actions {
			if a.Kind != ActionRetire {
				continue
			}
			if _, ok := roles[a.Role]; a.Generation != desired.Generation || !ok {
				oldRetired = true
			}
		}
		if oldRetired {
			for _, r := range desired.Roles {
				ok := false
				for _, s := range members {
					if !s.Deleting && s.Generation == desired.Generation && s.Role == r.Name &&
						s.Readiness.State == Ready && (r.Hash == "" || s.Hash == r.Hash) {
						ok = true
						break
					}
				}
				if !ok {
					t.Fatalf("I5: an old set is retired but role %q has no Ready set of %s\nobserved %+v\nplan %s",
						r.Name, desired.Generation, observed, plan)
				}
			}
		}
		for _, r := range desired.Roles {
			var oldest *Set
			for i, s := range members {
				if s.Deleting || s.Generation != desired.Generation || s.Role != r.Name {
					continue
				}
				if oldest == nil || fuzzSetLess(s, *oldest) < 0 {
					oldest = &members[i]
				}
			}
			if oldest == nil {
				continue
			}
			for _, a := range plan.Actions {
				if a.Kind == ActionRetire && a.UID == oldest.UID {
					t.Fatalf("oldest live set %s of role %q is retired\nobserved %+v\nplan %s", oldest, r.Name, observed, plan)
				}
			}
		}
	})
}

var (
	fuzzGroups = []string{"", "apps", "apiextensions.k8s.io", "admissionregistration.k8s.io"}
	fuzzKinds  = []string{"Namespace", "PersistentVolumeClaim", "CustomResourceDefinition", "Deployment", "ConfigMap"}
)

func (b *fuzzBytes) ref() Ref {
	return Ref{
		Group:     b.pick(fuzzGroups...),
		Kind:      b.pick(fuzzKinds...),
		Namespace: b.pick("", "ns"),
		Name:      b.pick("x", "y"),
	}
}

func (b *fuzzBytes) refs() []Ref {
	var out []Ref
	for range b.intn(6) {
		out = append(out, b.ref())
	}
	return out
}

func FuzzFinalization(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 3, 0, 0, 0, 0, 1, 0, 0, 0, 2, 2, 0, 0, 0, 2, 3, 0, 1, 0, 1, 1, 0, 0, 0, 0})
	f.Add([]byte{1, 1, 4, 2, 2, 3, 0, 0, 1, 1, 0, 0, 2, 0, 1, 0, 3, 1, 1, 0, 1, 2, 4, 3, 0, 1, 0, 0, 2, 2, 1, 3, 1, 0})
	f.Add([]byte("\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05"))
	f.Add([]byte("some arbitrary bytes for finalization \x00\xff\x10"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := &fuzzBytes{data: data}
		uids := []string{"u1", "u2", "u3", ""}
		retiring := Set{
			Name:      b.pick("a", "b", ""),
			UID:       types.UID(b.pick(uids...)),
			Deleting:  b.bool(),
			Resources: b.refs(),
		}
		var others []Set
		for range b.intn(5) {
			s := Set{
				Name:         b.pick("a", "b", "c", ""),
				UID:          types.UID(b.pick(uids...)),
				Deleting:     b.intn(3) == 0,
				SupersededBy: b.pick("", "g2"),
				Resources:    b.refs(),
			}
			if c := b.intn(4); c > 0 {
				s.Created = time.Unix(int64(c), 0)
			}
			others = append(others, s)
		}
		opts := DefaultPruneOptions()
		d := finalization(retiring, others, opts)

		protected := make(map[schema.GroupKind]bool)
		for _, gk := range opts.Protected {
			protected[gk] = true
		}
		listers := func(r Ref) []Set {
			var out []Set
			for _, s := range others {
				if s.UID == retiring.UID || s.Deleting {
					continue
				}
				for _, sr := range s.Resources {
					if sr == r {
						out = append(out, s)
						break
					}
				}
			}
			return out
		}
		dump := func() string {
			return fmt.Sprintf("retiring %+v\nothers %+v\ndecision %s", retiring, others, d)
		}

		listed := make(map[Ref]bool)
		for _, r := range retiring.Resources {
			listed[r] = true
		}
		count := make(map[Ref]int)
		for _, it := range d.Items {
			count[it.Ref]++
			if !listed[it.Ref] {
				t.Fatalf("item %v for a ref the retiring set does not list\n%s", it, dump())
			}
		}
		for r := range listed {
			if count[r] != 1 {
				t.Fatalf("ref %v appears %d times in the decision\n%s", r, count[r], dump())
			}
		}
		for _, it := range d.Items {
			ls := listers(it.Ref)
			if (it.Verdict == Keep) != (len(ls) > 0) {
				t.Fatalf("item %v: Keep is %v but %d other live sets list it\n%s", it, it.Verdict == Keep, len(ls), dump())
			}
			if it.Verdict == Keep {
				ok := false
				for _, s := range ls {
					if s.Name == it.Successor && s.UID == it.SuccessorUID {
						ok = true
						break
					}
				}
				if !ok {
					t.Fatalf("item %v: successor %s/%s is not a live set listing it\n%s", it, it.Successor, it.SuccessorUID, dump())
				}
			}
			if it.Verdict == Delete && (len(ls) > 0 || protected[it.Ref.GroupKind()]) {
				t.Fatalf("item %v deleted though listed by %d sets or protected\n%s", it, len(ls), dump())
			}
			if protected[it.Ref.GroupKind()] && it.Verdict == Delete {
				t.Fatalf("protected item %v is deleted\n%s", it, dump())
			}
		}
	})
}

// A cell whose hash bits agree with a resource's but which holds another
// resource is passed over: resources are compared whole.
func TestRefIndexHashBitsAgree(t *testing.T) {
	a := []Ref{{Kind: "ConfigMap", Namespace: "ns", Name: "x"}}
	b := Ref{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "x"}
	x := newRefIndex(2)
	x.addAll(a, make([]int32, 1))
	// Put a in the home cell of b with b's hash bits, as if their hashes
	// agreed there.
	home, tag := x.cell(refHash(&b))
	clear(x.cells)
	x.cells[home] = tag | 1
	if k := x.find(&b); k != -1 {
		t.Fatalf("find %v = %d, want -1: it is not in the index", b, k)
	}
	ks := make([]int32, 1)
	x.addAll([]Ref{b}, ks)
	if ks[0] != 1 {
		t.Fatalf("add %v: slot %d, want 1, its own", b, ks[0])
	}
	if k := x.find(&b); k != 1 {
		t.Fatalf("find %v = %d, want 1", b, k)
	}
}

// slotOf, which the executor asks for each resource it hands over, finds
// the slot of what a retiring set lists, and nothing else.
func TestDeciderSlotOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 6))
	ref := func() Ref {
		return Ref{Kind: []string{"ConfigMap", "Secret"}[rng.IntN(2)], Namespace: []string{"", "a"}[rng.IntN(2)], Name: fmt.Sprint(rng.IntN(30))}
	}
	for range 50 {
		sets := make([]Set, 1+rng.IntN(5))
		for i := range sets {
			sets[i].UID = types.UID(fmt.Sprint(i))
			for range rng.IntN(40) {
				sets[i].Resources = append(sets[i].Resources, ref())
			}
		}
		var retiring []int
		for i := range sets {
			if rng.IntN(2) == 0 {
				retiring = append(retiring, i)
			}
		}
		d := newDecider(sets, retiring, PruneOptions{})
		for i, s := range sets {
			for range 40 {
				r := ref()
				// What slotOf returned when it searched the list.
				want, wantOK := int32(0), false
				for n, k := range d.slots[i] {
					if k >= 0 && s.Resources[n] == r {
						want, wantOK = k, true
						break
					}
				}
				if got, ok := d.slotOf(i, r); got != want || ok != wantOK {
					t.Fatalf("slotOf(%d, %v) = %d, %v; want %d, %v", i, r, got, ok, want, wantOK)
				}
			}
		}
	}
}
