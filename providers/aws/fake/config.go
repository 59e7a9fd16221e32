package fake

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/nodewright/nodewright/providers/aws/transport"
)

// Config is an aws-sdk-go-v2 configuration for a fake served at endpoint:
// every client made from it calls the fake, anonymously, in us-east-1,
// retrying throttled calls without waiting, request bodies buffered (see
// transport.BufferedBodies).
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region: "us-east-1", Credentials: aws.AnonymousCredentials{}, BaseEndpoint: aws.String(endpoint),
		HTTPClient: transport.BufferedBodies(awshttp.NewBuildableClient()),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
}
