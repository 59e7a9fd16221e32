// Package aws is Nodewright's AWS cloud provider: it launches the
// instances behind NodeClaims whose NodePools name an EC2NodeClass, with
// aws-sdk-go-v2 (EC2, SSM, IAM), and reads the instance types, offerings
// and prices it may launch. Its subpackages hold the parts that need no
// provider state: selectors (an EC2NodeClass's subnets, security groups
// and AMIs), instancetype (capacity, allocatable and labels of a type),
// launchtemplate (user data), nodeclass (the EC2NodeClass controller) and
// fake (fake AWS endpoints every test runs against).
package aws
