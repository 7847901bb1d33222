package config

import (
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Replicas is nats.replicas: ReplicasAuto or a count of servers.
type Replicas int

// ReplicasAuto is `replicas: auto`, the default: as many replicas as the
// NATS cluster has servers, at most 3 (bus.StreamReplicas resolves it).
const ReplicasAuto Replicas = 0

// UnmarshalYAML reads auto or a number; 0 (which would read as auto) and
// anything else are refused.
func (r *Replicas) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*r = ReplicasAuto
		return nil
	}
	i, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || i < 1 {
		return fmt.Errorf("line %d: nats.replicas must be auto or 1 to 5, got %q", n.Line, n.Value)
	}
	*r = Replicas(i)
	return nil
}

// MarshalYAML writes auto or the number.
func (r Replicas) MarshalYAML() (any, error) {
	if r == ReplicasAuto {
		return "auto", nil
	}
	return int(r), nil
}

// String is auto or the number.
func (r Replicas) String() string {
	if r == ReplicasAuto {
		return "auto"
	}
	return strconv.Itoa(int(r))
}
