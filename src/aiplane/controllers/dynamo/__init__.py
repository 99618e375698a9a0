"""Dynamo graph deployments: DGD and DCD controllers."""
