"""A port of sigs.k8s.io/structured-merge-diff on plain dicts: the engine under server-side apply.

The modules follow SMD's packages: :mod:`.value` (ordering and equality of JSON values),
:mod:`.fieldpath` (path elements and field sets), :mod:`.schema` (what SMD's type converter makes
of a structural schema, and validation), :mod:`.typed` (the walkers over a value and its schema)
and :mod:`.merge` (the ``Updater``: managers, conflicts, apply and prune). kube's field-manager
wrappers around them live in :mod:`aiplane.sim.apiserver.managedfields`.
"""
