//go:build tools

// Package tools pins the etcd server the tests build (Debian's etcd is older than
// kube-apiserver supports).
package tools

import _ "go.etcd.io/etcd/server/v3"
