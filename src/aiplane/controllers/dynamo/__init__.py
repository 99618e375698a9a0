"""The NVIDIA Dynamo controllers (nvidia.com/v1alpha1): graph deployments and their components.

So far only pure decisions live here: the DynamoGraphDeployment controller's DCD path
(:mod:`.graph`, :mod:`.naming`, :mod:`.options`) and the DynamoComponentDeployment's pod template
(:mod:`.podtemplate`, :mod:`.backends`, :mod:`.merge`); the executors and ``setup(manager)`` come
later (issue #11).
"""
