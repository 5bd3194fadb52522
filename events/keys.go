package events

import "strings"

// RegistryKey is the etcd key of an API object:
// /registry/<group|core>/<resource>/<namespace>/<name>, or
// /registry/<group|core>/<resource>/<name> when namespace is empty.
func RegistryKey(group, resource, namespace, name string) string {
	g := group
	if g == "" {
		g = "core"
	}
	if namespace == "" {
		return RegistryPrefix + g + "/" + resource + "/" + name
	}
	return RegistryPrefix + g + "/" + resource + "/" + namespace + "/" + name
}

// ParseRegistryKey splits an object key made by RegistryKey. group is ""
// for the core group. ok is false for keys outside RegistryPrefix or with
// the wrong number of segments.
func ParseRegistryKey(key string) (group, resource, namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(key, RegistryPrefix)
	if !found {
		return "", "", "", "", false
	}
	parts := strings.Split(rest, "/")
	for _, p := range parts {
		if p == "" {
			return "", "", "", "", false
		}
	}
	switch len(parts) {
	case 3:
		group, resource, name = parts[0], parts[1], parts[2]
	case 4:
		group, resource, namespace, name = parts[0], parts[1], parts[2], parts[3]
	default:
		return "", "", "", "", false
	}
	if group == "core" {
		group = ""
	}
	return group, resource, namespace, name, true
}
