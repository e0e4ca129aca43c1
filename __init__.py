"""Not the package: the clone's own folder.

A script run from the folder above a clone named `kbert` imports this folder as `kbert`
(Python finds it on the path before the installed package); it used to come back as an
empty namespace package (`module 'kbert' has no attribute 'BertEncoder'`). Imported
under that name, this file loads the clone's package in its place and says so in one
line. Under any other name (a test runner collecting the clone) it does nothing.
"""

if __name__ == "kbert":
    import importlib.util as _util
    import os as _os
    import sys as _sys

    _inner = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "kbert")
    _spec = _util.spec_from_file_location("kbert", _os.path.join(_inner, "__init__.py"),
                                          submodule_search_locations=[_inner])
    _module = _util.module_from_spec(_spec)
    _sys.modules["kbert"] = _module  # what `import kbert` returns
    _spec.loader.exec_module(_module)
    if "pytest" not in _sys.modules:
        _sys.stderr.write(f"kbert: 'import kbert' found the clone folder "
                          f"{_os.path.dirname(_inner)}; using the package inside it\n")
