// Package deploy holds no code: it is the Go module of the tests that keep
// deploy/ working as written. They parse the Dockerfile and check its
// stages, binaries and user; load compose.yaml with compose-go; decode the
// Kubernetes manifests strictly into k8s.io/api types and check probes,
// resources, Secrets, autoscalers and policies; load config/ with
// pkg/config; and run nats-server with nats/ as shipped, attacking the
// permissions of accounts.conf. The module is separate so that k8s.io/api
// and compose-go stay out of the services' modules.
package deploy
