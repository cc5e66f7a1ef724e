package proxy

import "github.com/twmb/franz-go/pkg/kmsg"

// idListed decides an upstream topic id in a listing the tenant did not
// name ids for (OffsetFetch v10+ of all a group's topics): the tenant's
// or one the view has not learnt goes as it is; one the view knows as
// another's is left out. Unlike idDown, it never unmasks: nothing in a
// listing was masked, and unmasking an id the view has not learnt made
// it a random one (the web console's lag page then failed on it).
func (n *vcNames) idListed(id [16]byte) bool {
	return n.ids.owns(id, n.prefix) || !n.ids.known(id)
}

// vcListAll gives an OffsetFetch v10+ answer the groups asked for all
// their topics (its rewrite treats their ids as a listing).
func vcListAll(n *vcNames, req kmsg.Request) *vcNames {
	q, ok := req.(*kmsg.OffsetFetchRequest)
	if !ok || q.Version < 10 {
		return n
	}
	for _, g := range q.Groups {
		if g.Topics == nil {
			cp := *n
			cp.listAll = append(cp.listAll[:len(cp.listAll):len(cp.listAll)], g.Group)
			n = &cp
		}
	}
	return n
}
