package nodeclass

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodewright/nodewright/api/aws/v1"
	karpv1 "github.com/nodewright/nodewright/api/karpenter/v1"
	"github.com/nodewright/nodewright/internal/controller/watch"
	awsprovider "github.com/nodewright/nodewright/providers/aws"
	"github.com/nodewright/nodewright/providers/aws/selectors"
)

// Finalizer holds an EC2NodeClass until its AWS resources are cleaned up.
const Finalizer = awsv1.Group + "/termination"

// ResolveInterval is how often a class is resolved again, so new AMIs,
// subnets and security groups are found.
const ResolveInterval = 5 * time.Minute

// IAM is what the controller asks of IAM; *iam.Client satisfies it.
type IAM interface {
	GetInstanceProfile(ctx context.Context, in *iam.GetInstanceProfileInput, opts ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, opts ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, opts ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(ctx context.Context, in *iam.RemoveRoleFromInstanceProfileInput, opts ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(ctx context.Context, in *iam.DeleteInstanceProfileInput, opts ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
}

// EC2 is what the controller asks of EC2.
type EC2 interface {
	selectors.EC2
	ec2.DescribeLaunchTemplatesAPIClient
	DeleteLaunchTemplate(ctx context.Context, in *ec2.DeleteLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

// Options configure the controller.
type Options struct {
	ClusterName, Region string
	// KubernetesVersion ("1.37") picks the AMIs aliases resolve to.
	KubernetesVersion string
}

// Controller reconciles EC2NodeClasses.
type Controller struct {
	kube  client.Client
	ec2   EC2
	ssm   selectors.SSM
	iam   IAM
	clock clock.Clock
	opts  Options
}

// New wires the controller.
func New(kube client.Client, ec2api EC2, ssmapi selectors.SSM, iamapi IAM, clk clock.Clock, opts Options) *Controller {
	return &Controller{kube: kube, ec2: ec2api, ssm: ssmapi, iam: iamapi, clock: clk, opts: opts}
}

// Controllers declares the reconciler, woken by EC2NodeClasses and by
// the NodeClaims a deleted class waits for.
func (c *Controller) Controllers() []watch.Controller {
	return []watch.Controller{{Name: "ec2nodeclass", Reconciler: c, Sources: []watch.Source{
		watch.For(&awsv1.EC2NodeClass{}, nil),
		watch.Mapped(&karpv1.NodeClaim{}, classOfClaim),
	}}}
}

func classOfClaim(_ context.Context, o client.Object) []reconcile.Request {
	nc, ok := o.(*karpv1.NodeClaim)
	if !ok || nc.Spec.NodeClassRef == nil || nc.Spec.NodeClassRef.Kind != "EC2NodeClass" || nc.DeletionTimestamp == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: nc.Spec.NodeClassRef.Name}}}
}

// Reconcile implements reconcile.Reconciler.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, class); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if class.DeletionTimestamp != nil {
		return c.finalize(ctx, class)
	}
	if !controllerutil.ContainsFinalizer(class, Finalizer) {
		patch := client.MergeFrom(class.DeepCopy())
		controllerutil.AddFinalizer(class, Finalizer)
		if err := c.kube.Patch(ctx, class, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("adding the finalizer of ec2nodeclass %s: %w", class.Name, err)
		}
	}
	if hash, err := awsprovider.Hash(class); err == nil && (class.Annotations[awsv1.AnnotationNodeClassHash] != hash ||
		class.Annotations[awsv1.AnnotationNodeClassHashVersion] != awsprovider.HashVersion) {
		patch := client.MergeFrom(class.DeepCopy())
		metav1.SetMetaDataAnnotation(&class.ObjectMeta, awsv1.AnnotationNodeClassHash, hash)
		metav1.SetMetaDataAnnotation(&class.ObjectMeta, awsv1.AnnotationNodeClassHashVersion, awsprovider.HashVersion)
		if err := c.kube.Patch(ctx, class, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("stamping the hash of ec2nodeclass %s: %w", class.Name, err)
		}
	}
	before := class.Status.DeepCopy()
	now := metav1.NewTime(c.clock.Now())
	if err := selectors.Resolve(ctx, c.ec2, c.ssm, class, c.opts.KubernetesVersion, now); err != nil {
		return reconcile.Result{}, err
	}
	if err := c.instanceProfile(ctx, class, now); err != nil {
		return reconcile.Result{}, err
	}
	selectors.SetReady(class, now)
	if !equality.Semantic.DeepEqual(before, &class.Status) {
		if err := c.kube.Status().Update(ctx, class); err != nil {
			return reconcile.Result{}, fmt.Errorf("updating the status of ec2nodeclass %s: %w", class.Name, err)
		}
	}
	return reconcile.Result{RequeueAfter: ResolveInterval}, nil
}

// ProfileName is the instance profile made for a class's role: the
// cluster's name and a hash of the region and the class.
func ProfileName(cluster, region, class string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(region + "/" + class))
	return fmt.Sprintf("%s_%d", cluster, h.Sum64())
}

// instanceProfile resolves spec.instanceProfile (it must exist) or makes
// a profile holding spec.role, and sets InstanceProfileReady.
func (c *Controller) instanceProfile(ctx context.Context, class *awsv1.EC2NodeClass, now metav1.Time) error {
	set := func(ok bool, reason, message string) {
		selectors.SetCondition(class, selectors.ConditionInstanceProfileReady, ok, reason, message, now)
	}
	if name := aws.ToString(class.Spec.InstanceProfile); name != "" {
		_, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
		switch {
		case awsprovider.IsErrorCode(err, "NoSuchEntity"):
			set(false, "InstanceProfileNotFound", fmt.Sprintf("spec.instanceProfile %s does not exist", name))
			return nil
		case err != nil:
			return fmt.Errorf("ec2nodeclass %s: reading instance profile %s: %w", class.Name, name, err)
		}
		class.Status.InstanceProfile = name
		set(true, "", "")
		return nil
	}
	if class.Spec.Role == "" {
		set(false, "InstanceProfileNotFound", "neither spec.role nor spec.instanceProfile is set")
		return nil
	}
	name := ProfileName(c.opts.ClusterName, c.opts.Region, class.Name)
	out, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var profile *iamtypes.InstanceProfile
	switch {
	case awsprovider.IsErrorCode(err, "NoSuchEntity"):
		created, err := c.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: []iamtypes.Tag{
			{Key: aws.String(awsprovider.TagCluster), Value: aws.String(c.opts.ClusterName)}, {Key: aws.String(awsprovider.TagNodeClass), Value: aws.String(class.Name)},
			{Key: aws.String(fmt.Sprintf("kubernetes.io/cluster/%s", c.opts.ClusterName)), Value: aws.String("owned")}}})
		if err != nil {
			return fmt.Errorf("ec2nodeclass %s: creating instance profile %s: %w", class.Name, name, err)
		}
		profile = created.InstanceProfile
	case err != nil:
		return fmt.Errorf("ec2nodeclass %s: reading instance profile %s: %w", class.Name, name, err)
	default:
		profile = out.InstanceProfile
	}
	holds := ""
	if profile != nil && len(profile.Roles) > 0 {
		holds = aws.ToString(profile.Roles[0].RoleName)
	}
	if holds != class.Spec.Role {
		if holds != "" {
			if _, err := c.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(holds)}); err != nil {
				return fmt.Errorf("ec2nodeclass %s: removing role %s from instance profile %s: %w", class.Name, holds, name, err)
			}
		}
		_, err := c.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(class.Spec.Role)})
		switch {
		case awsprovider.IsErrorCode(err, "NoSuchEntity"):
			set(false, "RoleNotFound", fmt.Sprintf("spec.role %s does not exist", class.Spec.Role))
			return nil
		case err != nil:
			return fmt.Errorf("ec2nodeclass %s: adding role %s to instance profile %s: %w", class.Name, class.Spec.Role, name, err)
		}
	}
	class.Status.InstanceProfile = name
	set(true, "", "")
	return nil
}

// finalize cleans up once the class's NodeClaims are gone: its launch
// templates, then the instance profile made for its role.
func (c *Controller) finalize(ctx context.Context, class *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(class, Finalizer) {
		return reconcile.Result{}, nil
	}
	claims := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the nodeclaims of ec2nodeclass %s: %w", class.Name, err)
	}
	for _, nc := range claims.Items {
		if ref := nc.Spec.NodeClassRef; ref != nil && ref.Kind == "EC2NodeClass" && ref.Name == class.Name {
			return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
		}
	}
	pages := ec2.NewDescribeLaunchTemplatesPaginator(c.ec2, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + awsprovider.TagCluster), Values: []string{c.opts.ClusterName}},
		{Name: aws.String("tag:" + awsprovider.TagNodeClass), Values: []string{class.Name}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("finding the launch templates of ec2nodeclass %s: %w", class.Name, err)
		}
		for _, lt := range page.LaunchTemplates {
			_, err := c.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: lt.LaunchTemplateName})
			if err != nil && !awsprovider.IsErrorCode(err, "InvalidLaunchTemplateName.NotFoundException") {
				return reconcile.Result{}, fmt.Errorf("deleting launch template %s of ec2nodeclass %s: %w", aws.ToString(lt.LaunchTemplateName), class.Name, err)
			}
		}
	}
	if class.Spec.Role != "" && class.Spec.InstanceProfile == nil {
		name := ProfileName(c.opts.ClusterName, c.opts.Region, class.Name)
		if _, err := c.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(class.Spec.Role)}); err != nil && !awsprovider.IsErrorCode(err, "NoSuchEntity") {
			return reconcile.Result{}, fmt.Errorf("ec2nodeclass %s: removing role from instance profile %s: %w", class.Name, name, err)
		}
		if _, err := c.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !awsprovider.IsErrorCode(err, "NoSuchEntity") {
			return reconcile.Result{}, fmt.Errorf("ec2nodeclass %s: deleting instance profile %s: %w", class.Name, name, err)
		}
	}
	patch := client.MergeFrom(class.DeepCopy())
	controllerutil.RemoveFinalizer(class, Finalizer)
	if err := c.kube.Patch(ctx, class, patch); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("removing the finalizer of ec2nodeclass %s: %w", class.Name, err)
	}
	return reconcile.Result{}, nil
}
