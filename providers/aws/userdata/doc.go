// Package userdata writes the user data a node boots with: for AL2023 a
// MIME multi-part document whose NodeConfig (nodeadm) joins the cluster,
// after the user's own parts; for Bottlerocket a TOML settings document
// merged into the user's. It is pure: cluster facts and node settings in,
// text out.
package userdata
