package controlplane

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// InstallCRDs creates (or updates) the given CRD manifests and waits until
// each is established and its resource answers a list call.
func InstallCRDs(ctx context.Context, cfg *rest.Config, manifests [][]byte) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building apiextensions client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building dynamic client: %w", err)
	}
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(manifests))
	for _, m := range manifests {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(m, crd); err != nil {
			return fmt.Errorf("decoding CRD: %w", err)
		}
		crds = append(crds, crd)
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			existing, getErr := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if getErr != nil {
				return fmt.Errorf("reading CRD %s: %w", crd.Name, getErr)
			}
			crd.ResourceVersion = existing.ResourceVersion
			_, err = client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			established := false
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("CRD %s names not accepted: %s", crd.Name, c.Message)
				}
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, nil
			}
			for _, v := range crd.Spec.Versions {
				gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
				if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s: %w", crd.Name, err)
		}
	}
	return nil
}
