package crds

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/util/webhook"
)

// work reconciles queued definitions until ctx is done.
func (c *Controller) work(ctx context.Context) {
	for {
		for name := c.queue.next(); name != ""; name = c.queue.next() {
			if err := c.reconcile(ctx, name); err != nil && ctx.Err() == nil {
				c.log.Info("crds: reconcile, retrying", "name", name, "err", err)
				c.queue.addAfter(name, 500*time.Millisecond)
			}
			c.queue.done(name)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.queue.wake:
		}
	}
}

func (c *Controller) reconcile(ctx context.Context, name string) error {
	crd, ok := c.get(name)
	if !ok {
		return nil
	}
	if crd.DeletionTimestamp != nil {
		if !apihelpers.CRDHasFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer) {
			return nil
		}
		return c.finalize(ctx, crd)
	}
	want := crd.DeepCopy()
	c.names(want)
	if equality.Semantic.DeepEqual(crd.Status, want.Status) {
		return nil
	}
	if !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) && apihelpers.IsCRDConditionTrue(want, apiextensionsv1.Established) {
		// Serve before the condition is visible, so that a client that
		// waits for it finds the kind here (other apiservers find it
		// through Sync). A failed write is undone by the next event.
		c.serve(want)
	}
	return c.updateStatus(ctx, want)
}

// names is kube's naming controller (calculateNamesAndConditions) and
// establishing controller in one: accept what does not conflict with the
// group's other definitions, then establish.
func (c *Controller) names(crd *apiextensionsv1.CustomResourceDefinition) {
	resources, kinds := c.groupNames(crd.Spec.Group)
	req, acc := crd.Spec.Names, crd.Status.AcceptedNames
	newNames := acc
	cond := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionUnknown}
	conflict := func(reason string, err error) {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionFalse, reason, err.Error()
	}
	if err := freshOrAccepted(req.Plural, acc.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		newNames.Plural = req.Plural
	}
	if err := freshOrAccepted(req.Singular, acc.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		newNames.Singular = req.Singular
	}
	if !slices.Equal(req.ShortNames, acc.ShortNames) {
		var err error
		for _, s := range req.ShortNames {
			if slices.Contains(acc.ShortNames, s) {
				continue
			}
			if e := freshOrAccepted(s, "", resources); e != nil && err == nil {
				err = e
			}
		}
		if err != nil {
			conflict("ShortNamesConflict", err)
		} else {
			newNames.ShortNames = req.ShortNames
		}
	}
	if err := freshOrAccepted(req.Kind, acc.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		newNames.Kind = req.Kind
	}
	if err := freshOrAccepted(req.ListKind, acc.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		newNames.ListKind = req.ListKind
	}
	newNames.Categories = req.Categories
	if cond.Status == apiextensionsv1.ConditionUnknown {
		cond.Status, cond.Reason, cond.Message = apiextensionsv1.ConditionTrue, "NoConflicts", "no conflicts found"
	}
	crd.Status.AcceptedNames = newNames
	setCondition(crd, cond)
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		return
	}
	est := apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
		Reason: "NotAccepted", Message: "not all names are accepted"}
	switch {
	case cond.Status != apiextensionsv1.ConditionTrue:
	case invalidCABundle(crd):
		// kube's EstablishingController: not established while the
		// conversion webhook's caBundle is not a CA bundle (validation
		// lets a definition have one until it is established).
		est = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionFalse,
			Reason: "InvalidCABundle", Message: "The conversion webhook CABundle is invalid"}
	default:
		est = apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue,
			Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}
	}
	setCondition(crd, est)
}

// invalidCABundle is the EstablishingController's check: a conversion
// webhook caBundle from which no TLS configuration can be made.
func invalidCABundle(crd *apiextensionsv1.CustomResourceDefinition) bool {
	conv := crd.Spec.Conversion
	if conv == nil || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
		return false
	}
	return len(webhook.ValidateCABundle(field.NewPath(""), conv.Webhook.ClientConfig.CABundle)) > 0
}

// setCondition sets a condition, keeping its transition time when only
// the reason or message change (apihelpers.SetCRDCondition).
func setCondition(crd *apiextensionsv1.CustomResourceDefinition, cond apiextensionsv1.CustomResourceDefinitionCondition) {
	if old := apihelpers.FindCRDCondition(crd, cond.Type); old != nil && apihelpers.IsCRDConditionEquivalent(old, &cond) {
		return
	}
	apihelpers.SetCRDCondition(crd, cond)
	if cond := apihelpers.FindCRDCondition(crd, cond.Type); cond != nil {
		// The log and the tables show seconds; etcd needs no more.
		cond.LastTransitionTime = metav1.NewTime(cond.LastTransitionTime.Truncate(time.Second))
	}
}

func freshOrAccepted(requested, accepted string, used map[string]bool) error {
	if requested == accepted || !used[requested] {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}

// finalize is kube's CRDFinalizer: delete every object of the definition,
// wait until none is left (their own finalizers may hold them), then drop
// the cleanup finalizer, which lets the definition go.
func (c *Controller) finalize(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	setCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
		Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress"})
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) && crd.Status.AcceptedNames.Plural != "" {
		path := c.collectionPath(crd)
		left, err := c.deleteAll(ctx, path)
		if err != nil {
			setCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
				Status: apiextensionsv1.ConditionTrue, Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not issue all deletes: %v", err)})
			_ = c.updateStatus(ctx, crd)
			return err
		}
		if left > 0 {
			if err := c.updateStatus(ctx, crd); err != nil {
				return err
			}
			c.queue.addAfter(crd.Name, time.Second)
			return nil
		}
		setCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "InstanceDeletionCompleted", Message: "removed all instances"})
	} else {
		setCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating,
			Status: apiextensionsv1.ConditionFalse, Reason: "NeverEstablished", Message: "resource was never established"})
	}
	apihelpers.CRDRemoveFinalizer(crd, apiextensionsv1.CustomResourceCleanupFinalizer)
	return c.updateStatus(ctx, crd)
}

// collectionPath is the URL of every object of a definition, in its
// storage version (all namespaces).
func (c *Controller) collectionPath(crd *apiextensionsv1.CustomResourceDefinition) string {
	v, _ := apihelpers.GetCRDStorageVersion(crd)
	for _, ver := range crd.Spec.Versions {
		if apihelpers.HasServedCRDVersion(crd, v) {
			break
		}
		if ver.Served {
			v = ver.Name
		}
	}
	return "/apis/" + crd.Spec.Group + "/" + v + "/" + crd.Status.AcceptedNames.Plural
}

// deleteAll deletes the collection and returns how many objects are left.
func (c *Controller) deleteAll(ctx context.Context, path string) (int, error) {
	if _, err := c.do(ctx, http.MethodDelete, path, nil); err != nil && !apierrors.IsNotFound(err) {
		return 0, err
	}
	body, err := c.do(ctx, http.MethodGet, path+"?"+url.Values{"limit": {"1"}}.Encode(), nil)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func (c *Controller) updateStatus(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	b, err := jsonBody(crd)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPut, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+crd.Name+"/status", b)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// do makes one loopback request; a Status answer is returned as its
// error.
func (c *Controller) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://loopback"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "cairn-apiextensions-controllers")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		st := &metav1.Status{}
		if json.Unmarshal(out, st) == nil && st.Kind == "Status" {
			return nil, &apierrors.StatusError{ErrStatus: *st}
		}
		return nil, fmt.Errorf("crds: %s %s: %d %s", method, path, resp.StatusCode, out)
	}
	return out, nil
}
