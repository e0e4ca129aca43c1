"""kbert models. The folders of the `KBERT_FAMILY_PATH` variable (os.pathsep-separated)
join this package's path: a family package there (a folder with `__init__.py` and
`hooks.py`) is `kbert.models.NAME`, found and registered like the ones kbert ships
(`kbert.models.registry.family_packages`)."""

import os as _os

__path__ += [_os.path.abspath(p) for p in _os.environ.get("KBERT_FAMILY_PATH", "").split(
    _os.pathsep) if p]
