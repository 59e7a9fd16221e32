// Package cloudprovider is the small contract between Nodewright's
// controllers and a cloud: launch an instance for a NodeClaim, find it, list
// and delete instances, describe the instance types a NodePool may use, and
// say whether an instance has drifted from its NodeClass. Optional
// capabilities are separate interfaces a provider may also implement.
//
// Errors that change what the controllers do are typed (insufficient
// capacity, NodeClaim not found, NodeClass not ready) with New/Is helpers.
// Subpackages: metrics (a decorator that records Karpenter's cloudprovider
// metrics) and providertest (the contract suite every provider must pass).
package cloudprovider
