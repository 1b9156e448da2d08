"""The problem, as data: instances (``instance/``: fields, loading, network, SI
arrays), the plan every solver returns (``plan``), the GPU catalog and model
presets (``catalog``), units and regions, the JSON schemas of the files
(``schema``, ``schemas/``) and DT-FM's scenarios as instances.

The lowest layer: it imports nothing of the package above it (the loader's
check that the model fits at all reads the stage arithmetic of ``cost``, lazily).
"""
