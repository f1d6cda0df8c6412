package bench

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ParseArgs sets a benchmark's parameters from its key=value arguments.
// dst maps each key to where its value goes, and the destination's type
// says what the value must be:
//
//   - *int: a whole number, 0 or more
//   - *uint64: a whole number
//   - *[]int: positive whole numbers separated by commas
//   - *string: any text
//   - *[]string: texts separated by commas, none empty
//   - *time.Duration: a duration such as 30s, not negative
//   - *bool: 1, true, 0 or false
//   - func(string) error: checks and keeps the value itself
//
// Errors start with name and say which argument is wrong and what was
// expected; an unknown key's error lists the known ones.
func ParseArgs(name string, args []string, dst map[string]any) error {
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%s: argument %q: want key=value", name, a)
		}
		d, ok := dst[k]
		if !ok {
			return fmt.Errorf("%s: unknown argument %q (%s)", name, k, strings.Join(slices.Sorted(maps.Keys(dst)), ", "))
		}
		if err := setArg(d, v); err != nil {
			return fmt.Errorf("%s: %s=%q: %w", name, k, v, err)
		}
	}
	return nil
}

// Choice returns a ParseArgs setter that keeps in dst the value choices
// names; any other word is an error listing the names.
func Choice[T any](dst *T, choices map[string]T) func(string) error {
	return func(v string) error {
		c, ok := choices[v]
		if !ok {
			return fmt.Errorf("want one of %s", strings.Join(slices.Sorted(maps.Keys(choices)), ", "))
		}
		*dst = c
		return nil
	}
}

func setArg(dst any, v string) error {
	switch d := dst.(type) {
	case *int:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("want a whole number")
		}
		*d = n
	case *uint64:
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want a whole number")
		}
		*d = n
	case *[]int:
		var ns []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				return fmt.Errorf("want positive whole numbers separated by commas")
			}
			ns = append(ns, n)
		}
		*d = ns
	case *string:
		*d = v
	case *[]string:
		fs := strings.Split(v, ",")
		if slices.Contains(fs, "") {
			return fmt.Errorf("want texts separated by commas, none empty")
		}
		*d = fs
	case *time.Duration:
		t, err := time.ParseDuration(v)
		if err != nil || t < 0 {
			return fmt.Errorf("want a duration such as 30s, not negative")
		}
		*d = t
	case *bool:
		switch v {
		case "1", "true":
			*d = true
		case "0", "false":
			*d = false
		default:
			return fmt.Errorf("want 1, true, 0 or false")
		}
	case func(string) error:
		return d(v)
	default:
		panic(fmt.Sprintf("bench.ParseArgs: destination of type %T", dst))
	}
	return nil
}
