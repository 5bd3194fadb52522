package web

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/cairn-dev/cairn/projections/history/store"
	"github.com/cairn-dev/cairn/projections/history/travel"
)

// resolve is Resolve, then the kinds of the CustomResourceDefinitions the
// history holds at its head: `cairn timeline kiln/k1` finds Kilns by the
// names their definition gives them (kind, plural, singular, short names).
func (h *handler) resolve(kind string) (group, resource string, err error) {
	group, resource, err = Resolve(kind)
	if err == nil {
		return group, resource, nil
	}
	want := strings.ToLower(kind)
	found := false
	_ = h.st.View(func(tx *store.Tx) error {
		_, items, lerr := travel.List(tx, "apiextensions.k8s.io", "customresourcedefinitions", "", travel.Point{})
		if lerr != nil {
			return lerr
		}
		for _, it := range items {
			var crd struct {
				Spec struct {
					Group string `json:"group"`
					Names struct {
						Plural     string   `json:"plural"`
						Singular   string   `json:"singular"`
						Kind       string   `json:"kind"`
						ShortNames []string `json:"shortNames"`
					} `json:"names"`
				} `json:"spec"`
			}
			if json.Unmarshal(it.Object, &crd) != nil {
				continue
			}
			n := crd.Spec.Names
			if slices.Contains(append([]string{strings.ToLower(n.Kind), n.Plural, n.Singular}, n.ShortNames...), want) {
				group, resource, found = crd.Spec.Group, n.Plural, true
				return nil
			}
		}
		return nil
	})
	if found {
		return group, resource, nil
	}
	return "", "", err
}
