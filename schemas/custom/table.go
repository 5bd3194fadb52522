package custom

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/cairn-dev/cairn/schemas"
)

// table renders additionalPrinterColumns with kube's own convertor
// (JSONPath cells, typed and formatted as kube-apiserver sends them).
type table struct {
	conv rest.TableConvertor
	cols []metav1.TableColumnDefinition
}

var _ schemas.TableConvertor = (*table)(nil)

func newTable(crd *apiextensionsv1.CustomResourceDefinition, ver string) (*table, error) {
	var cols []apiextensionsv1.CustomResourceColumnDefinition
	for _, v := range crd.Spec.Versions {
		if v.Name == ver {
			cols = v.AdditionalPrinterColumns
		}
	}
	if len(cols) == 0 {
		// kube's serveDefaultColumnsIfEmpty.
		cols = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"], JSONPath: ".metadata.creationTimestamp"}}
	}
	conv, err := tableconvertor.New(cols)
	if err != nil {
		// kube falls back to default printing; validation refuses bad
		// JSONPaths, so this is a definition stored before that check.
		return nil, fmt.Errorf("printer columns: %w", err)
	}
	t, err := conv.ConvertToTable(context.Background(), &unstructured.UnstructuredList{}, nil)
	if err != nil {
		return nil, fmt.Errorf("printer columns: %w", err)
	}
	return &table{conv: conv, cols: t.ColumnDefinitions}, nil
}

func (t *table) Columns() []metav1.TableColumnDefinition { return t.cols }

func (t *table) Row(obj schemas.Object) []any {
	tb, err := t.conv.ConvertToTable(context.Background(), obj, &metav1.TableOptions{NoHeaders: true})
	if err != nil || len(tb.Rows) == 0 {
		cells := make([]any, len(t.cols))
		cells[0] = obj.GetName()
		return cells
	}
	return tb.Rows[0].Cells
}
