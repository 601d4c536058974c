//go:build tools

// Package tools pins helm, which lints, renders and installs the chart in the tests.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
