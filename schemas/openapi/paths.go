package openapi

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/cairn-dev/cairn/schemas"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// pathItem is one URL and its operations.
type pathItem struct {
	Path   string
	Params []param
	Ops    []operation
}

type operation struct {
	Method      string // get, post, put, patch, delete
	Action      string // x-kubernetes-action
	ID          string
	Description string
	GVK         schema.GroupVersionKind
	Params      []param
	// Body is the definition of the request body, "" for none.
	Body string
	// Patch marks a PATCH body (Kubernetes' four patch media types).
	Patch bool
	// Response is the definition returned with the success codes.
	Response string
	Codes    []string
	Tag      string
}

type param struct {
	Name, In, Type, Description string
	Required                    bool
}

// Definition names the paths refer to besides the kinds' own.
const (
	statusDef        = "io.k8s.apimachinery.pkg.apis.meta.v1.Status"
	deleteOptionsDef = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"
	patchDef         = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch"
)

// subresourceKind is what a subresource reads and writes, and how.
type subresourceKind struct {
	// GVK and Type are empty for subresources that use the parent's kind.
	GVK     schema.GroupVersionKind
	Type    reflect.Type
	Create  bool // POST only (binding, eviction); otherwise get/put/patch
	Replace bool // PUT only (namespaces/finalize)
}

var subresourceKinds = map[string]subresourceKind{
	"scale":    {GVK: autoscalingv1.SchemeGroupVersion.WithKind("Scale"), Type: reflect.TypeFor[autoscalingv1.Scale]()},
	"binding":  {GVK: corev1.SchemeGroupVersion.WithKind("Binding"), Type: reflect.TypeFor[corev1.Binding](), Create: true},
	"eviction": {GVK: policyv1.SchemeGroupVersion.WithKind("Eviction"), Type: reflect.TypeFor[policyv1.Eviction](), Create: true},
	"finalize": {Replace: true},
}

var (
	pPretty     = param{"pretty", "query", "string", "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).", false}
	pDryRun     = param{"dryRun", "query", "string", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed", false}
	pFieldMgr   = param{"fieldManager", "query", "string", "fieldManager is a name associated with the actor or entity that is making these changes.", false}
	pFieldValid = param{"fieldValidation", "query", "string", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default) and Strict.", false}
	pForce      = param{"force", "query", "boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Must be unset for non-apply patch requests.", false}
	writeParams = []param{pDryRun, pFieldMgr, pFieldValid}
	listParams  = []param{
		{"allowWatchBookmarks", "query", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\".", false},
		{"continue", "query", "string", "The continue option should be set when retrieving more results from the server.", false},
		{"fieldSelector", "query", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything.", false},
		{"labelSelector", "query", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything.", false},
		{"limit", "query", "integer", "limit is a maximum number of responses to return for a list call.", false},
		{"resourceVersion", "query", "string", "resourceVersion sets a constraint on what resource versions a request may be served from.", false},
		{"resourceVersionMatch", "query", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls.", false},
		{"sendInitialEvents", "query", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`: the stream begins with synthetic events for the current state.", false},
		{"timeoutSeconds", "query", "integer", "Timeout for the list/watch call.", false},
		{"watch", "query", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.", false},
	}
	deleteParams = []param{
		pDryRun,
		{"gracePeriodSeconds", "query", "integer", "The duration in seconds before the object should be deleted.", false},
		{"orphanDependents", "query", "boolean", "Deprecated: please use the PropagationPolicy.", false},
		{"propagationPolicy", "query", "string", "Whether and how garbage collection will be performed: Orphan, Background or Foreground.", false},
	}
)

// groupTag is the name Kubernetes uses for a group in operation ids
// ("Core", "Apps", "RbacAuthorization") and tags ("core", "apps",
// "rbacAuthorization").
func groupTag(group string) (id, tag string) {
	if group == "" {
		return "Core", "core"
	}
	group = strings.TrimSuffix(group, ".k8s.io")
	var b strings.Builder
	for i, part := range strings.FieldsFunc(group, func(r rune) bool { return r == '.' || r == '-' }) {
		if i == 0 {
			b.WriteString(part)
			continue
		}
		b.WriteString(upperFirst(part))
	}
	tag = b.String()
	return upperFirst(tag), tag
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// gvPath is the URL prefix of a group version without the leading slash:
// "api/v1" or "apis/apps/v1".
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// resourcePaths returns the URLs of r and its subresources.
func resourcePaths(r *schemas.Resource, kindDef, listDef string, subDefs map[string]string) []pathItem {
	gvk := r.GVK()
	gid, gtag := groupTag(gvk.Group)
	idBase := gid + upperFirst(gvk.Version)
	tag := gtag + "_" + gvk.Version
	prefix := "/" + gvPath(r.GroupVersion)
	scope := ""
	collection := prefix + "/" + r.Plural
	if r.Namespaced {
		scope = "Namespaced"
		collection = prefix + "/namespaces/{namespace}/" + r.Plural
	}
	item := collection + "/{name}"
	op := func(method, action, verb, suffix, desc string) operation {
		return operation{
			Method: method, Action: action, GVK: gvk, Tag: tag, Description: desc,
			ID: verb + idBase + scope + gvk.Kind + suffix,
		}
	}
	nsParam := param{"namespace", "path", "string", "object name and auth scope, such as for teams and projects", true}
	nameParam := param{"name", "path", "string", "name of the " + gvk.Kind, true}
	collParams := []param{pPretty}
	itemParams := []param{nameParam, pPretty}
	if r.Namespaced {
		collParams = []param{nsParam, pPretty}
		itemParams = []param{nameParam, nsParam, pPretty}
	}

	list := op("get", "list", "list", "", "list or watch objects of kind "+gvk.Kind)
	list.Params, list.Response, list.Codes = listParams, listDef, []string{"200"}
	create := op("post", "post", "create", "", "create a "+gvk.Kind)
	create.Params, create.Body, create.Response, create.Codes = writeParams, kindDef, kindDef, []string{"200", "201", "202"}
	delColl := op("delete", "deletecollection", "deleteCollection", "", "delete collection of "+gvk.Kind)
	delColl.Params, delColl.Body, delColl.Response, delColl.Codes = append(append([]param{}, listParams...), deleteParams...), deleteOptionsDef, statusDef, []string{"200"}
	paths := []pathItem{{Path: collection, Params: collParams, Ops: []operation{list, create, delColl}}}

	get := op("get", "get", "read", "", "read the specified "+gvk.Kind)
	get.Response, get.Codes = kindDef, []string{"200"}
	put := op("put", "put", "replace", "", "replace the specified "+gvk.Kind)
	put.Params, put.Body, put.Response, put.Codes = writeParams, kindDef, kindDef, []string{"200", "201"}
	patch := op("patch", "patch", "patch", "", "partially update the specified "+gvk.Kind)
	patch.Params, patch.Body, patch.Patch, patch.Response, patch.Codes = append(append([]param{}, writeParams...), pForce), patchDef, true, kindDef, []string{"200", "201"}
	del := op("delete", "delete", "delete", "", "delete a "+gvk.Kind)
	del.Params, del.Body, del.Response, del.Codes = deleteParams, deleteOptionsDef, statusDef, []string{"200", "202"}
	paths = append(paths, pathItem{Path: item, Params: itemParams, Ops: []operation{get, put, patch, del}})

	if r.Namespaced {
		all := list
		all.ID = "list" + idBase + gvk.Kind + "ForAllNamespaces"
		paths = append(paths, pathItem{Path: prefix + "/" + r.Plural, Params: []param{pPretty}, Ops: []operation{all}})
	}

	for _, sub := range r.Subresources {
		paths = append(paths, subresourcePath(r, sub, item, itemParams, op, kindDef, subDefs[sub]))
	}
	return paths
}

func subresourcePath(r *schemas.Resource, sub, item string, itemParams []param,
	op func(method, action, verb, suffix, desc string) operation, kindDef, subDef string,
) pathItem {
	sk := subresourceKinds[sub]
	def := kindDef
	if subDef != "" {
		def = subDef
	}
	suffix := upperFirst(sub)
	p := pathItem{Path: item + "/" + sub, Params: itemParams}
	if sk.Create {
		post := op("post", "post", "create", suffix, fmt.Sprintf("create %s of a %s", sub, r.Kind))
		post.Params, post.Body, post.Response, post.Codes = writeParams, def, def, []string{"200", "201", "202"}
		if sk.GVK.Kind != "" {
			post.GVK = sk.GVK
		}
		p.Ops = []operation{post}
		return p
	}
	get := op("get", "get", "read", suffix, fmt.Sprintf("read %s of the specified %s", sub, r.Kind))
	get.Response, get.Codes = def, []string{"200"}
	put := op("put", "put", "replace", suffix, fmt.Sprintf("replace %s of the specified %s", sub, r.Kind))
	put.Params, put.Body, put.Response, put.Codes = writeParams, def, def, []string{"200", "201"}
	patch := op("patch", "patch", "patch", suffix, fmt.Sprintf("partially update %s of the specified %s", sub, r.Kind))
	patch.Params, patch.Body, patch.Patch, patch.Response, patch.Codes = append(append([]param{}, writeParams...), pForce), patchDef, true, def, []string{"200", "201"}
	p.Ops = []operation{get, put, patch}
	if sk.Replace {
		p.Ops = []operation{put}
	}
	if sk.GVK.Kind != "" {
		for i := range p.Ops {
			p.Ops[i].GVK = sk.GVK
		}
	}
	return p
}

var patchTypes = []string{
	"application/apply-patch+yaml",
	"application/json-patch+json",
	"application/merge-patch+json",
	"application/strategic-merge-patch+json",
}

var mediaTypes = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}

func (p param) v3() map[string]any {
	out := map[string]any{
		"name": p.Name, "in": p.In, "description": p.Description,
		"schema": map[string]any{"type": p.Type, "uniqueItems": true},
	}
	if p.Required {
		out["required"] = true
	}
	return out
}

func (p param) v2() map[string]any {
	out := map[string]any{"name": p.Name, "in": p.In, "description": p.Description, "type": p.Type, "uniqueItems": true}
	if p.Required {
		out["required"] = true
	}
	return out
}

func renderPathV3(p pathItem) map[string]any {
	out := map[string]any{"parameters": paramsV3(p.Params)}
	for _, o := range p.Ops {
		op := map[string]any{
			"description":                     o.Description,
			"operationId":                     o.ID,
			"tags":                            []any{o.Tag},
			"x-kubernetes-action":             o.Action,
			"x-kubernetes-group-version-kind": gvkMap(o.GVK),
		}
		if len(o.Params) > 0 {
			op["parameters"] = paramsV3(o.Params)
		}
		if o.Body != "" {
			types := []string{"*/*"}
			if o.Patch {
				types = patchTypes
			}
			content := map[string]any{}
			for _, t := range types {
				content[t] = map[string]any{"schema": map[string]any{"$ref": v3RefPrefix + o.Body}}
			}
			op["requestBody"] = map[string]any{"content": content, "required": o.Method != "delete"}
		}
		responses := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
		for _, code := range o.Codes {
			content := map[string]any{}
			for _, t := range mediaTypes {
				content[t] = map[string]any{"schema": map[string]any{"$ref": v3RefPrefix + o.Response}}
			}
			responses[code] = map[string]any{"description": codeText(code), "content": content}
		}
		op["responses"] = responses
		out[o.Method] = op
	}
	return out
}

func renderPathV2(p pathItem) map[string]any {
	out := map[string]any{"parameters": paramsV2(p.Params)}
	for _, o := range p.Ops {
		op := map[string]any{
			"description":                     o.Description,
			"operationId":                     o.ID,
			"tags":                            []any{o.Tag},
			"schemes":                         []any{"https"},
			"produces":                        mediaTypes,
			"consumes":                        []string{"*/*"},
			"x-kubernetes-action":             o.Action,
			"x-kubernetes-group-version-kind": gvkMap(o.GVK),
		}
		params := paramsV2(o.Params)
		if o.Patch {
			op["consumes"] = patchTypes
		}
		if o.Body != "" {
			params = append(params, map[string]any{
				"name": "body", "in": "body", "required": o.Method != "delete",
				"schema": map[string]any{"$ref": v2RefPrefix + o.Body},
			})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		responses := map[string]any{"401": map[string]any{"description": "Unauthorized"}}
		for _, code := range o.Codes {
			responses[code] = map[string]any{
				"description": codeText(code),
				"schema":      map[string]any{"$ref": v2RefPrefix + o.Response},
			}
		}
		op["responses"] = responses
		out[o.Method] = op
	}
	return out
}

func paramsV3(ps []param) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		out[i] = p.v3()
	}
	return out
}

func paramsV2(ps []param) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		out[i] = p.v2()
	}
	return out
}

func codeText(code string) string {
	switch code {
	case "201":
		return "Created"
	case "202":
		return "Accepted"
	}
	return "OK"
}
