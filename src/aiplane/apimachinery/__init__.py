"""The base layer every other package may import, as k8s.io/apimachinery is for Go controllers.

Object readers and metadata helpers, Quantity, label selectors, conditions, field errors with
kube's wording, Go-style value printing and the built-in kinds' OpenAPI schemas. Nothing here
performs I/O or imports another aiplane package (see docs/architecture.md).
"""
