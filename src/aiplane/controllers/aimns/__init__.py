"""AIMNamespaceConfig: which config applies in a namespace, its status and Events, and gateway HTTPRoutes."""
