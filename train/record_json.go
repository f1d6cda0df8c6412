package train

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// notFiniteWhy says, for the fields of Record that may be undefined
// without anything being wrong, why a value is not finite.
var notFiniteWhy = map[string]string{
	"img_cos": "the mean cosine between different validation images is undefined for fewer than two images (or non-finite embeddings)",
	"txt_cos": "the mean cosine between different validation captions is undefined for fewer than two captions (or non-finite embeddings)",
}

// MarshalJSON writes r with its fields in order. A number that is not
// finite (NaN or an infinity, which JSON cannot hold: the image cosine of a
// validation set of one image is NaN) is written as null, and the object
// "not_finite" maps the field's name ("img_cos", or "ndcg/rouge-l/i2t" for
// an NDCG entry) to its value ("NaN", "+Inf", "-Inf") and, where known,
// why. UnmarshalJSON reads the values back.
func (r Record) MarshalJSON() ([]byte, error) {
	notFinite := map[string]string{}
	note := func(key string, x float64) {
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if math.IsInf(x, 1) {
			s = "+Inf"
		}
		if why := notFiniteWhy[key]; why != "" {
			s += ": " + why
		}
		notFinite[key] = s
	}
	var b bytes.Buffer
	b.WriteByte('{')
	rv := reflect.ValueOf(r)
	rt := rv.Type()
	for i := range rt.NumField() {
		name, opts, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		v := rv.Field(i)
		if opts == "omitempty" && (v.IsZero() || v.Kind() == reflect.Map && v.Len() == 0) {
			continue
		}
		val := v.Interface()
		switch x := val.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				note(name, x)
				val = nil
			}
		case map[string]float64:
			m := make(map[string]*float64, len(x))
			for k, y := range x {
				if math.IsNaN(y) || math.IsInf(y, 0) {
					note(name+"/"+k, y)
					m[k] = nil
					continue
				}
				m[k] = &y
			}
			val = m
		}
		enc, err := json.Marshal(val)
		if err != nil {
			return nil, fmt.Errorf("record field %s: %w", name, err)
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", name)
		b.Write(enc)
	}
	if len(notFinite) > 0 {
		enc, err := json.Marshal(notFinite)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"not_finite":`)
		b.Write(enc)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a record that MarshalJSON wrote, the values of its
// "not_finite" object included.
func (r *Record) UnmarshalJSON(b []byte) error {
	type plain Record
	var p struct {
		plain
		NotFinite map[string]string `json:"not_finite"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Record(p.plain)
	if len(p.NotFinite) == 0 {
		return nil
	}
	rv := reflect.ValueOf(r).Elem()
	rt := rv.Type()
	for key, s := range p.NotFinite {
		num, _, _ := strings.Cut(s, ":")
		x, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(math.IsNaN(x) || math.IsInf(x, 0)) {
			return fmt.Errorf("record: not_finite %q is %q: want NaN, +Inf or -Inf", key, s)
		}
		field, sub, _ := strings.Cut(key, "/")
		found := false
		for i := range rt.NumField() {
			if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != field {
				continue
			}
			switch f := rv.Field(i); {
			case f.Kind() == reflect.Float64 && sub == "":
				f.SetFloat(x)
				found = true
			case f.Kind() == reflect.Map && sub != "":
				if f.IsNil() {
					f.Set(reflect.MakeMap(f.Type()))
				}
				f.SetMapIndex(reflect.ValueOf(sub), reflect.ValueOf(x))
				found = true
			}
		}
		if !found {
			return fmt.Errorf("record: not_finite names %q, which is not a number of a record", key)
		}
	}
	return nil
}
