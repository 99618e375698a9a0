"""ModelInfer controller: multi-role, multi-node inference groups (workload.volcano.sh/v1alpha1).

Pure modules (plain dicts in, plain dicts out; no I/O, no clock), see docs/modelinfer.md:

* :mod:`.naming` — object names, label and annotation keys, ordinal parsing;
* :mod:`.revision` — the revision hash of the pod templates and the ControllerRevisions keeping them;
* :mod:`.objects` — the Pods, headless Services and Volcano PodGroups of a group;
* :mod:`.validation` — spec problems the CRD cannot reject, and maxUnavailable/maxSurge resolution.
"""
