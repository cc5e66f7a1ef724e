package proxy

// VersionsAnswerer is an Answerer that also says which versions of its
// keys the gateway offers: ApiVersions answers on its listeners carry
// them whatever the backend offers (a built-in broker, or an upstream,
// without the key still gets the key answered by the gateway).
type VersionsAnswerer interface {
	Answerer
	// Versions returns the version range offered per key on listener.
	Versions(listener string) map[int16][2]int16
}

// Versions merges the ranges of the members that state theirs; for a
// key two members answer, the first's range is offered (it answers).
func (as Answerers) Versions(listener string) map[int16][2]int16 {
	out := map[int16][2]int16{}
	for i, a := range as {
		va, ok := a.(VersionsAnswerer)
		if !ok {
			continue
		}
		for k, r := range va.Versions(listener) {
			if _, seen := out[k]; !seen && as[:i].pick(listener, k) == nil {
				out[k] = r
			}
		}
	}
	return out
}

// offerAnswered sets, in an ApiVersions response body, the versions of
// the keys the Answerer answers on this session's listener.
func (s *session) offerAnswered(version int16, body []byte) ([]byte, error) {
	va, ok := s.srv.opts.Answerer.(VersionsAnswerer)
	if !ok {
		return body, nil
	}
	keys := va.Versions(s.l.opts.Name)
	if len(keys) == 0 {
		return body, nil
	}
	return offerKeys(version, body, keys)
}
