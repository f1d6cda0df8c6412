package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
)

// MetaChecksums is the metadata key under which Save stores the checksum of
// every tensor's data: a JSON object mapping each tensor's name to the
// CRC-32C (Castagnoli) of its bytes in the file, as 8 lowercase hex digits,
//
//	"crc32c": "{\"fc.bias\":\"1c291ca3\",\"fc.weight\":\"e3069283\"}"
//
// LoadInto and Tensor verify it. Files without it (other writers, xmr
// before checksums) load unverified.
const MetaChecksums = "crc32c"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC-32C (Castagnoli polynomial, as in iSCSI, ext4 and
// the SSE4.2 instruction) of b. It is the checksum of Checksums, exported so
// that other files of xmr use the same one.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Checksums maps names (of tensors, or of any blocks of a file) to the
// CRC-32C of their bytes. Its text form, Marshal's, is a JSON object of
// 8-digit lowercase hex strings.
type Checksums map[string]uint32

// Marshal returns c as a JSON object with sorted keys.
func (c Checksums) Marshal() string {
	m := make(map[string]string, len(c))
	for k, v := range c {
		m[k] = fmt.Sprintf("%08x", v)
	}
	b, err := json.Marshal(m) // keys sorted
	if err != nil {
		panic(fmt.Sprintf("checkpoint: marshal checksums: %v", err)) // strings always encode
	}
	return string(b)
}

// ParseChecksums reads what Marshal writes; the error says which entry is
// malformed.
func ParseChecksums(s string) (Checksums, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("checksums: want a JSON object of hex strings: %v", err)
	}
	c := make(Checksums, len(m))
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := m[k]
		if len(v) != 8 {
			return nil, fmt.Errorf("checksums: %q: %q is not 8 hex digits", k, v)
		}
		n, err := strconv.ParseUint(v, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("checksums: %q: %q is not 8 hex digits", k, v)
		}
		c[k] = uint32(n)
	}
	return c, nil
}

// Verify checks b against the checksum recorded for name: an error when
// they differ or when c records none for name.
func (c Checksums) Verify(name string, b []byte) error {
	want, ok := c[name]
	if !ok {
		return fmt.Errorf("%q has no checksum", name)
	}
	if got := CRC32C(b); got != want {
		return fmt.Errorf("%q is corrupt: CRC-32C of its %d bytes is %08x, the file records %08x", name, len(b), got, want)
	}
	return nil
}

// crcF32 returns the CRC-32C of x's little-endian bytes, as Write writes
// them.
func crcF32(x []float32) uint32 {
	if littleEndian {
		return CRC32C(bytesOf(x))
	}
	h := crc32.New(castagnoli)
	writeF32(h, x) // a hash.Hash never fails to write
	return h.Sum32()
}

// firstNonFinite returns the index of the first element of raw data of
// dtype that is NaN or infinite once read as float32, or -1. Only float
// dtypes can hold one; an F64 value beyond float32's range counts, as it
// reads as infinite.
func firstNonFinite(raw []byte, dtype string) int {
	switch dtype {
	case "F32":
		for i := 0; i+4 <= len(raw); i += 4 {
			if binary.LittleEndian.Uint32(raw[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	case "F16":
		for i := 0; i+2 <= len(raw); i += 2 {
			if binary.LittleEndian.Uint16(raw[i:])&0x7c00 == 0x7c00 {
				return i / 2
			}
		}
	case "BF16":
		for i := 0; i+2 <= len(raw); i += 2 {
			if binary.LittleEndian.Uint16(raw[i:])&0x7f80 == 0x7f80 {
				return i / 2
			}
		}
	case "F64":
		for i := 0; i+8 <= len(raw); i += 8 {
			v := float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[i:])))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return i / 8
			}
		}
	}
	return -1
}
