"""`python .../probe` or `python -m gputui.diag.probe`: run the diagnosis (see the package doc)."""

import importlib.util
import os
import sys

if not __package__:
    # Run as a directory: load it as a package of a private name, and take its directory off
    # sys.path so that nothing here shadows a module the diagnosed code imports.
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == _here:
        del sys.path[0]
    _spec = importlib.util.spec_from_file_location(
        "_gputui_probe", os.path.join(_here, "__init__.py"), submodule_search_locations=[_here]
    )
    _package = importlib.util.module_from_spec(_spec)
    sys.modules["_gputui_probe"] = _package
    _spec.loader.exec_module(_package)
    from _gputui_probe.main import main
else:
    from .main import main

sys.exit(main())
