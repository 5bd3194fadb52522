package openapi

import "k8s.io/apimachinery/pkg/runtime/schema"

const (
	v2RefPrefix = "#/definitions/"
	v3RefPrefix = "#/components/schemas/"
)

// renderV3 turns n into OpenAPI v3 JSON the way Kubernetes publishes it:
// a reference with siblings is wrapped in allOf, alternatives are oneOf.
func renderV3(n *node) map[string]any {
	out := map[string]any{}
	if n.Ref != "" {
		ref := map[string]any{"$ref": v3RefPrefix + n.Ref}
		if n.Description == "" && n.Default == nil && len(n.Ext) == 0 {
			return ref
		}
		out["allOf"] = []any{ref}
	} else {
		if n.Type != "" && len(n.OneOf) == 0 {
			out["type"] = n.Type
		}
		if len(n.OneOf) > 0 {
			alts := make([]any, len(n.OneOf))
			for i, t := range n.OneOf {
				alts[i] = map[string]any{"type": t}
			}
			out["oneOf"] = alts
		}
		renderCommon(n, out, renderV3)
	}
	renderDocs(n, out)
	return out
}

// renderV2 turns n into Swagger 2.0 JSON: references stay plain $ref with
// the description beside them, and alternatives collapse to their v2 type.
func renderV2(n *node) map[string]any {
	out := map[string]any{}
	if n.Ref != "" {
		out["$ref"] = v2RefPrefix + n.Ref
	} else {
		if n.Type != "" {
			out["type"] = n.Type
		}
		renderCommon(n, out, renderV2)
	}
	if n.Description != "" {
		out["description"] = n.Description
	}
	for k, v := range n.Ext {
		out[k] = v
	}
	return out
}

func renderCommon(n *node, out map[string]any, render func(*node) map[string]any) {
	if n.Format != "" {
		out["format"] = n.Format
	}
	if n.Items != nil {
		out["items"] = render(n.Items)
	}
	if n.AdditionalProperties != nil {
		out["additionalProperties"] = render(n.AdditionalProperties)
	}
	if len(n.Properties) > 0 {
		props := map[string]any{}
		for k, p := range n.Properties {
			props[k] = render(p)
		}
		out["properties"] = props
	}
	if len(n.Required) > 0 {
		out["required"] = n.Required
	}
	if n.PreserveUnknown {
		out["x-kubernetes-preserve-unknown-fields"] = true
	}
}

func renderDocs(n *node, out map[string]any) {
	if n.Description != "" {
		out["description"] = n.Description
	}
	if n.Default != nil {
		out["default"] = n.Default
	}
	for k, v := range n.Ext {
		out[k] = v
	}
}

// renderDefinition renders a definition with its
// x-kubernetes-group-version-kind list.
func renderDefinition(d *definition, render func(*node) map[string]any) map[string]any {
	out := render(d.Schema)
	if len(d.GVKs) > 0 {
		out["x-kubernetes-group-version-kind"] = gvkList(d.GVKs)
	}
	return out
}

func gvkMap(gvk schema.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

func gvkList(gvks []schema.GroupVersionKind) []any {
	out := make([]any, len(gvks))
	for i, g := range gvks {
		out[i] = gvkMap(g)
	}
	return out
}
