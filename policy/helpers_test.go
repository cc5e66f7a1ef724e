package policy

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-kafka/tollgate/configs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mustParse parses a policy YAML snippet (the body of a tollgate file)
// through configs, as the gateway does, and compiles it.
func mustParse(t testing.TB, yaml string) *Engine {
	t.Helper()
	c, err := configs.Parse([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, yaml)
	}
	e, _, err := Compile(c.Policy)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return e
}

func subj(listener, addr, clientID, principal string) *Subject {
	return &Subject{Listener: listener, Addr: netip.MustParseAddr(addr), ClientID: clientID, Principal: principal}
}

// fill puts one element in every list and a value in every field of a
// kmsg request, so that a response mirroring it has entries to check.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type().Elem().Kind() == reflect.String && v.IsNil() {
			s := "p"
			v.Set(reflect.ValueOf(&s))
		}
	case reflect.String:
		v.SetString("s")
	case reflect.Array:
		if v.Type() == idType {
			v.Set(reflect.ValueOf([16]byte{1, 2, 3}))
		}
	case reflect.Slice:
		et := v.Type().Elem()
		if depth > 5 || et.Kind() == reflect.Uint8 || et.Name() == "Tags" {
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Name == "Version" || f.Name == "UnknownTags" {
				continue
			}
			switch f.Name {
			case "Topic":
				setStr(v.Field(i), "orders")
				continue
			case "ResourceType":
				v.Field(i).SetInt(2) // TOPIC
				continue
			case "ResourceName":
				setStr(v.Field(i), "orders")
				continue
			}
			fill(v.Field(i), depth+1)
		}
	}
}

func setStr(v reflect.Value, s string) {
	if v.Kind() == reflect.String {
		v.SetString(s)
	} else if v.Kind() == reflect.Pointer {
		v.Set(reflect.ValueOf(&s))
	}
}

// roundTrip encodes and decodes a request at its version, dropping what
// the version does not carry.
func roundTrip(t testing.TB, r kmsg.Request) kmsg.Request {
	t.Helper()
	b := r.AppendTo(nil)
	out := kmsg.RequestForKey(r.Key())
	out.SetVersion(r.GetVersion())
	if err := out.ReadFrom(b); err != nil {
		t.Fatalf("%s v%d: request round trip: %v", kmsg.NameForKey(r.Key()), r.GetVersion(), err)
	}
	return out
}

// errorCodes lists every non-zero ErrorCode in a decoded message, with
// its path.
func errorCodes(v reflect.Value, path string, out map[string]int16) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			errorCodes(v.Elem(), path, out)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			p := t.Field(i).Name
			if path != "" {
				p = path + "." + p
			}
			if strings.HasSuffix(t.Field(i).Name, "ErrorCode") && v.Field(i).Kind() == reflect.Int16 {
				if c := int16(v.Field(i).Int()); c != 0 {
					out[p] = c
				}
				continue
			}
			errorCodes(v.Field(i), p, out)
		}
	case reflect.Slice:
		for i := range v.Len() {
			errorCodes(v.Index(i), path+"[]", out)
		}
	}
}

func reflectOf(v any) reflect.Value { return reflect.ValueOf(v) }

func v2time() time.Time { return time.Unix(2000, 0) }
