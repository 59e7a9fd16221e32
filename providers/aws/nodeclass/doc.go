// Package nodeclass is the EC2NodeClass controller: it resolves a
// class's subnets, security groups and AMIs (selectors), its instance
// profile (named, or made from spec.role), stamps the class's hash, and
// writes status and conditions; Ready is False, naming the selector, when
// anything resolves to nothing. On deletion it waits for the class's
// NodeClaims to go, then deletes the launch templates and the instance
// profile it made.
package nodeclass
