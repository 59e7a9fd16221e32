// Package fake is a fake AWS for Nodewright's AWS provider: one HTTP handler
// on loopback that speaks the wire protocols of the calls the provider
// makes (EC2 Query with XML answers, SSM JSON 1.1), backed by the instance
// catalog (pkg/catalog), a simulated VPC (subnets, security groups, AMIs
// and their SSM alias parameters, instance profiles) and failure injection
// (throttling, 5xx, slow answers, and calls carried out whose answers are
// lost: queued with Fail or drawn at a seeded rate with FailRate and
// LoseResponses, counted by Injected). Like EC2, CreateFleet is idempotent
// per client token, and DescribeInstances can lag new instances
// (Options.DescribeLag). Tests point aws-sdk-go-v2 clients at it with a
// BaseEndpoint; `nodewright fake-aws` serves it for local runs.
//
// It fakes what the provider needs, not AWS: calls it does not know are
// answered with an error naming the action.
package fake
