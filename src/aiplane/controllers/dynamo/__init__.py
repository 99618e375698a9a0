"""The NVIDIA Dynamo controllers (nvidia.com/v1alpha1): graph deployments and their components.

The DynamoComponentDeployment controller (:mod:`.component_controller`, with its pure decisions in
:mod:`.component_children` and :mod:`.component_status`) builds on the pod template
(:mod:`.podtemplate`, :mod:`.backends`, :mod:`.merge`); the DynamoGraphDeployment controller's DCD
path is decided in :mod:`.graph`, :mod:`.naming` and :mod:`.options` (docs/dynamo.md).
"""
