package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// TemplateIdle is how long a launch template may go unused before it is
// deleted (a new image or NodeClass change leaves the old ones unused).
const TemplateIdle = 10 * time.Minute

// CleanupLaunchTemplates deletes the cluster's launch templates no launch
// has used for TemplateIdle: those this process used longer ago, and
// those it never used that were made longer ago (by an earlier run). It
// returns how many it deleted.
func (p *Provider) CleanupLaunchTemplates(ctx context.Context) (int, error) {
	now := p.clock.Now()
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + TagCluster), Values: []string{p.opts.ClusterName}},
	}})
	deleted := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("listing launch templates: %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			name := aws.ToString(lt.LaunchTemplateName)
			p.templatesMu.Lock()
			used, known := p.templates[name]
			p.templatesMu.Unlock()
			if !known {
				used = aws.ToTime(lt.CreateTime)
			}
			if now.Sub(used) < TemplateIdle {
				continue
			}
			_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
			if err != nil && !IsErrorCode(err, "InvalidLaunchTemplateName.NotFoundException") {
				return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
			}
			p.forgetTemplate(name)
			deleted++
		}
	}
	return deleted, nil
}

// TemplateCleanup runs CleanupLaunchTemplates every interval (a
// controller-runtime Runnable, on the leader only).
func (p *Provider) TemplateCleanup(interval time.Duration) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-p.clock.After(interval):
			}
			if n, err := p.CleanupLaunchTemplates(ctx); err != nil {
				p.opts.Log.Error(err, "cleaning up launch templates")
			} else if n > 0 {
				p.opts.Log.Info("deleted unused launch templates", "count", n)
			}
		}
	})
}

// IsErrorCode reports whether err is an AWS API error with code.
func IsErrorCode(err error, code string) bool {
	var apiErr smithy.APIError
	return err != nil && errors.As(err, &apiErr) && apiErr.ErrorCode() == code
}
