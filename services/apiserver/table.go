package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cairn-dev/cairn/schemas"
)

// table renders objects as a meta.k8s.io/v1 Table, the server-side printing
// kubectl get relies on.
func (s *Server) table(q *request, items []schemas.Object, rv, cont string) *metav1.Table {
	t := &metav1.Table{}
	t.Kind, t.APIVersion = "Table", "meta.k8s.io/v1"
	t.ResourceVersion, t.Continue = rv, cont
	if q.res.Table != nil {
		t.ColumnDefinitions = q.res.Table.Columns()
	} else {
		t.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
		}
	}
	if q.r.URL.Query().Get("includeObject") == "" && q.out.includeObject == "" {
		q.out.includeObject = metav1.IncludeMetadata
	}
	t.Rows = make([]metav1.TableRow, 0, len(items))
	for _, obj := range items {
		t.Rows = append(t.Rows, s.tableRow(q, obj))
	}
	return t
}

func (s *Server) tableRow(q *request, obj schemas.Object) metav1.TableRow {
	var row metav1.TableRow
	if q.res.Table != nil {
		row.Cells = q.res.Table.Row(obj)
	} else {
		row.Cells = []any{obj.GetName()}
	}
	switch q.out.includeObject {
	case metav1.IncludeNone:
	case metav1.IncludeObject:
		row.Object = runtime.RawExtension{Object: obj}
	default:
		row.Object = runtime.RawExtension{Object: partialMeta(obj)}
	}
	return row
}

func partialMetaList(items []schemas.Object, rv, cont string) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.Kind, l.APIVersion = "PartialObjectMetadataList", "meta.k8s.io/v1"
	l.ResourceVersion, l.Continue = rv, cont
	for _, obj := range items {
		l.Items = append(l.Items, *partialMeta(obj))
	}
	return l
}
