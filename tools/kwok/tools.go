//go:build tools

// Package tools pins kwok, which plays the nodes and kubelets of the test cluster.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
