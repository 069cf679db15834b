package handoff

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
)

// refIndex numbers resources: those added are numbered in order from 0,
// and the slot of a resource is the number of its first copy, so slots are
// sparse where a resource is added twice.
//
// It is an open-addressing table with linear probing, at most two thirds
// full, whose 4-byte cells hold a slot and as many bits of the resource's
// hash as the slot leaves free. A map keyed by Ref holds the 64-byte Ref
// itself: for 100 000 resources the table is 600 kB where such a map is
// about 10 MB, the garbage collector never scans it, and adding a resource
// is one probe where a map needs a lookup and then an assignment.
// Resources are compared whole only when the hash bits agree.
type refIndex struct {
	cells  []uint32 // hash bits | slot+1; 0 is empty
	low    uint32   // the bits of a cell that hold slot+1
	lists  [][]Ref  // the lists added, in order
	starts []int32  // starts[j]: the number of lists[j][0]
	added  int32    // how many resources were added
}

// refSeed seeds the hash of every index, so that no input can be chosen
// to collide.
var refSeed = maphash.MakeSeed()

// newRefIndex makes an index for up to n resources.
func newRefIndex(n int) refIndex {
	if n >= 1<<30 {
		// A slot would not leave a bit of hash in a cell; 2^30 resources
		// would take 64 GiB of Refs before the index.
		panic(fmt.Sprintf("handoff: %d resources to index", n))
	}
	return refIndex{cells: make([]uint32, max(16, n+n/2)), low: 1<<bits.Len(uint(n)) - 1}
}

// probeBatch is how many resources addAll and findAll hash before they
// probe the table. Hashing reads every name, a cache miss each in a large
// family, and a loop that only hashes lets those misses overlap, where
// between probes each waits for the one before.
const probeBatch = 32

// cell returns the home cell and the hash bits of a hash.
func (x *refIndex) cell(h uint64) (uint32, uint32) {
	return uint32(uint64(uint32(h)) * uint64(len(x.cells)) >> 32), uint32(h>>32) &^ x.low
}

// ref returns the resource numbered k.
func (x *refIndex) ref(k int32) *Ref {
	j := len(x.starts) - 1
	if j > 8 {
		j, _ = slices.BinarySearch(x.starts, k+1)
		j--
	}
	for x.starts[j] > k {
		j--
	}
	return &x.lists[j][k-x.starts[j]]
}

// hashRefs sets hs[n] to the hash of rs[n].
func hashRefs(rs []Ref, hs []uint64) {
	for n := range rs {
		hs[n] = refHash(&rs[n])
	}
}

// refHash hashes a Ref field by field (maphash.Comparable would do it in
// one call, but needs Go 1.24; the module builds with Go 1.22). The fields
// are mixed in order, so the same strings in other fields hash apart; a
// collision costs a comparison, never a wrong answer.
func refHash(r *Ref) uint64 {
	const mix = 0x9e3779b97f4a7c15
	h := maphash.String(refSeed, r.Name)
	h = (h ^ maphash.String(refSeed, r.Namespace)) * mix
	h = (h ^ maphash.String(refSeed, r.Kind)) * mix
	h = (h ^ maphash.String(refSeed, r.Group)) * mix
	return h ^ h>>29
}

// probe returns the cell of r, whose hash is h: the one that holds it, or
// the empty one where it goes.
func (x *refIndex) probe(r *Ref, h uint64) uint32 {
	c, tag := x.cell(h)
	for {
		v := x.cells[c]
		if v == 0 || (v&^x.low == tag && *x.ref(int32(v&x.low) - 1) == *r) {
			return c
		}
		if c++; int(c) == len(x.cells) {
			c = 0
		}
	}
}

// slot returns the slot a cell holds, -1 for an empty one.
func (x *refIndex) slot(c uint32) int32 {
	return int32(x.cells[c]&x.low) - 1
}

// find returns the slot of r, or -1.
func (x *refIndex) find(r *Ref) int32 {
	return x.slot(x.probe(r, refHash(r)))
}

// findAll sets ks[n] to the slot of rs[n], or -1.
func (x *refIndex) findAll(rs []Ref, ks []int32) {
	var hs [probeBatch]uint64
	for len(rs) > 0 {
		b := min(len(rs), probeBatch)
		hashRefs(rs[:b], hs[:b])
		for n := range b {
			ks[n] = x.slot(x.probe(&rs[n], hs[n]))
		}
		rs, ks = rs[b:], ks[b:]
	}
}

// addAll adds the resources of rs and sets ks[n] to the slot of rs[n]. rs
// must stay unchanged while the index is in use.
func (x *refIndex) addAll(rs []Ref, ks []int32) {
	x.lists = append(x.lists, rs)
	x.starts = append(x.starts, x.added)
	var hs [probeBatch]uint64
	for len(rs) > 0 {
		b := min(len(rs), probeBatch)
		hashRefs(rs[:b], hs[:b])
		for n := range b {
			c := x.probe(&rs[n], hs[n])
			if x.cells[c] == 0 {
				_, tag := x.cell(hs[n])
				x.cells[c] = tag | uint32(x.added+1)
			}
			x.added++
			ks[n] = x.slot(c)
		}
		rs, ks = rs[b:], ks[b:]
	}
}
