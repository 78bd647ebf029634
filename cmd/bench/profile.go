package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// profile is the part of a pprof profile the bench reads: per sample, its
// values and its call stack as function names, leaf first.
type profile struct {
	sampleTypes []string
	samples     []profSample
}

type profSample struct {
	values []int64
	stack  []string
}

// valueIndex is the index of the named sample type, -1 if absent.
func (p *profile) valueIndex(name string) int {
	for i, t := range p.sampleTypes {
		if t == name {
			return i
		}
	}
	return -1
}

// parseProfile decodes a gzipped pprof protobuf as runtime/pprof writes
// it. Only the fields named below are read (see profile.proto: Profile
// 1 sample_type, 2 sample, 4 location, 5 function, 6 string_table).
func parseProfile(data []byte) (*profile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("profile: gunzip: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("profile: gunzip: %w", err)
	}
	type rawSample struct {
		locs   []uint64
		values []int64
	}
	var (
		strs      []string
		typeIdx   []int64
		samples   []rawSample
		locFuncs  = map[uint64][]uint64{} // location id → function ids, leaf first
		funcNames = map[uint64]int64{}    // function id → string index
	)
	err = eachField(raw, func(num protowire.Number, typ protowire.Type, b []byte, _ uint64) error {
		switch num {
		case 1: // sample_type: ValueType{type=1}
			return eachField(b, func(n protowire.Number, _ protowire.Type, _ []byte, v uint64) error {
				if n == 1 {
					typeIdx = append(typeIdx, int64(v))
				}
				return nil
			})
		case 2: // sample: location_id=1, value=2 (packed or not)
			var s rawSample
			err := eachField(b, func(n protowire.Number, t protowire.Type, bb []byte, v uint64) error {
				switch n {
				case 1:
					return appendVarints(t, bb, v, func(x uint64) { s.locs = append(s.locs, x) })
				case 2:
					return appendVarints(t, bb, v, func(x uint64) { s.values = append(s.values, int64(x)) })
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location: id=1, line=4 {function_id=1}
			var id uint64
			var funcs []uint64
			err := eachField(b, func(n protowire.Number, _ protowire.Type, bb []byte, v uint64) error {
				switch n {
				case 1:
					id = v
				case 4:
					return eachField(bb, func(ln protowire.Number, _ protowire.Type, _ []byte, lv uint64) error {
						if ln == 1 {
							funcs = append(funcs, lv)
						}
						return nil
					})
				}
				return nil
			})
			locFuncs[id] = funcs
			return err
		case 5: // function: id=1, name=2
			var id uint64
			var name int64
			err := eachField(b, func(n protowire.Number, _ protowire.Type, _ []byte, v uint64) error {
				switch n {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	p := &profile{}
	for _, t := range typeIdx {
		p.sampleTypes = append(p.sampleTypes, str(t))
	}
	for _, s := range samples {
		ps := profSample{values: s.values}
		for _, l := range s.locs {
			for _, f := range locFuncs[l] {
				ps.stack = append(ps.stack, str(funcNames[f]))
			}
		}
		p.samples = append(p.samples, ps)
	}
	return p, nil
}

// eachField calls fn for every field of a protobuf message: b is the
// payload of a length-delimited field, v the value of a varint one.
func eachField(msg []byte, fn func(num protowire.Number, typ protowire.Type, b []byte, v uint64) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("profile: bad tag: %w", protowire.ParseError(n))
		}
		msg = msg[n:]
		var b []byte
		var v uint64
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(msg)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(msg)
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return fmt.Errorf("profile: bad field %d: %w", num, protowire.ParseError(n))
		}
		msg = msg[n:]
		if err := fn(num, typ, b, v); err != nil {
			return err
		}
	}
	return nil
}

// appendVarints reads a repeated integer field, packed or not.
func appendVarints(typ protowire.Type, b []byte, v uint64, add func(uint64)) error {
	if typ == protowire.VarintType {
		add(v)
		return nil
	}
	if typ != protowire.BytesType {
		return errors.New("profile: repeated integer of unexpected wire type")
	}
	for len(b) > 0 {
		x, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return fmt.Errorf("profile: bad packed integer: %w", protowire.ParseError(n))
		}
		add(x)
		b = b[n:]
	}
	return nil
}
