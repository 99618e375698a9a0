"""The NVIDIA Dynamo controllers (nvidia.com/v1alpha1): graph deployments and their components.

So far only the pure decisions of the DynamoGraphDeployment controller's DCD path live here
(:mod:`.graph`); the executor and ``setup(manager)`` come later (issue #11).
"""
